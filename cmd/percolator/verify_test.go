package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/verify"
	"github.com/seed-992972ee/percolator/workload"
)

// runVerifyProc runs `percolator verify args...` as a process of its own
// (its clients and servers are processes of the same binary) and returns
// its output and exit status.
func runVerifyProc(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := command(append([]string{"verify"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	return runExit(t, cmd)
}

// runExit runs cmd and returns its output (stdout and stderr) and exit
// status.
func runExit(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// readReport decodes a run's report.json.
func readReport(t *testing.T, out string) verify.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r verify.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// runVerifyEnough runs verify with args and a new --out directory until
// its report shows enough work (enough): a run that exits 0 with too
// little (a busy machine's clients did almost nothing in --duration) runs
// again for twice as long, a fault half as often, at most maxSlowRuns
// times, so that what the test checks does not depend on the machine's
// speed. It returns the last
// run's output, exit status, report (zero unless it exited 0) and --out.
func runVerifyEnough(t *testing.T, enough func(verify.Report) bool, args ...string) (string, int, verify.Report, string) {
	t.Helper()
	for slow := 0; ; slow++ {
		out := filepath.Join(t.TempDir(), "out")
		text, code := runVerifyProc(t, nil, append(slices.Clone(args), "--out", out)...)
		if code != 0 {
			return text, code, verify.Report{}, out
		}
		r := readReport(t, out)
		if enough(r) || slow == maxSlowRuns {
			return text, code, r, out
		}
		args = slowDown(t, args)
		t.Logf("%d operations, too little work to check; again for %s, a fault every %s", r.Result.OK, flagArg(args, "--duration"), flagArg(args, "--interval"))
	}
}

// TestVerifyTargets runs a short checked history on each deployment verify
// starts itself, under every kind of fault (processes killed and paused
// past their leases, the network cut, delayed and replies dropped, a
// power cut, a skewed clock): the verdict is valid, operations were
// checked, faults injected, and the history, the report and the
// processes' logs are in --out. The garbage collector runs throughout, at
// a 300ms lifetime. The whole matrix is TestFaultSuiteVerifyMatrix's.
func TestVerifyTargets(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	for _, c := range []struct{ target, workload, faults string }{
		{"dir", "list-append", "kill"},
		{"dir", "observer", "kill"},
		{"server", "bank", "kill,powercut,drop"},
		{"server", "lock", "expire,cut,delay"},
		{"server", "graph", "kill,drop"},
		{"distributed", "observer", "kill,partition,skew"},
	} {
		t.Run(c.target+"/"+c.workload+"/"+c.faults, func(t *testing.T) {
			faults := func(r verify.Report) (n int) {
				for _, k := range r.Faults {
					n += k
				}
				return n
			}
			// The garbage collector runs at a short lifetime: the history
			// must hold no forbidden anomaly with it collecting.
			text, code, r, out := runVerifyEnough(t, func(r verify.Report) bool { return r.Result.OK > 0 && faults(r) > 0 && r.Events > 0 },
				"--target", c.target, "--workload", c.workload, "--fault", c.faults, "--duration", "3s",
				"--clients", "2", "--threads", "2", "--interval", "700ms", "--gc-lifetime", "300ms")
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, text)
			}
			if !strings.Contains(text, "VALID: no forbidden anomaly") {
				t.Fatalf("no verdict:\n%s", text)
			}
			injected := faults(r)
			if r.Result.OK == 0 || injected == 0 || r.Events == 0 || !r.Result.Valid {
				t.Fatalf("report: %d ok, %d faults, %d events, valid %v\n%s", r.Result.OK, injected, r.Events, r.Result.Valid, text)
			}
			for _, f := range []string{"history.jsonl", "report.txt", "logs", "clients"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestVerifyExistingServer checks a server verify did not start: it faults
// only its own clients and workers, and removes the rows and the observer
// it made; --cleanup removes what a killed run left under verify's prefix
// (its rows, its observer) and nothing else.
func TestVerifyExistingServer(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	dir, addr := t.TempDir(), freeAddr(t)
	serveProc(t, dir, addr)
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(row, col string) {
		t.Helper()
		if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(row, col, []byte("1")) }); err != nil {
			t.Fatal(err)
		}
	}
	put("users/a", "v") // the operator's own row
	text, code, r, _ := runVerifyEnough(t, func(r verify.Report) bool { return r.Removed > 0 && r.Result.OK > 0 && r.Result.Counts["runs"] > 0 },
		"--server", addr, "--workload", "observer", "--duration", "2s", "--clients", "2", "--threads", "2", "--workers", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, text)
	}
	if r.Removed == 0 || r.Result.OK == 0 || r.Result.Counts["runs"] == 0 {
		t.Fatalf("removed %d cells after %d ok operations, %d observer runs\n%s", r.Removed, r.Result.OK, r.Result.Counts["runs"], text)
	}
	for role := range r.Faults {
		if !strings.HasSuffix(role, "client") && !strings.HasSuffix(role, "worker") {
			t.Errorf("faulted %q on a deployment verify did not start", role)
		}
	}
	if n := rowsUnder(t, db, verify.RowPrefix, "v"); n != 0 {
		t.Fatalf("%d rows left under %s", n, verify.RowPrefix)
	}
	if n := verifyObservers(t, addr); n != 0 {
		t.Fatalf("%d observers of the run left", n)
	}

	// What a killed run leaves: its rows, its observer and its column.
	killed := verify.RowPrefix + "killed-run/"
	if err := db.Observe(ctx, percolator.Observer{Name: workload.ObserverName(killed), Column: workload.ObservedColumn(killed),
		Fn: func(context.Context, *percolator.Txn, string, string) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	put(killed+"0", "v")
	put(killed+"1", workload.ObservedColumn(killed))
	text, code = runVerifyProc(t, nil, "--server", addr, "--cleanup")
	if code != 0 || !strings.Contains(text, "removed 2 cells") {
		t.Fatalf("cleanup: exit %d\n%s", code, text)
	}
	if a, b, c, d := rowsUnder(t, db, verify.RowPrefix, "v"), rowsUnder(t, db, verify.RowPrefix, workload.ObservedColumn(killed)), verifyObservers(t, addr), rowsUnder(t, db, "users/", "v"); a != 0 || b != 0 || c != 0 || d != 1 {
		t.Fatalf("after the cleanup: %d rows under %s, %d cells of the killed run's column, %d observers of verify's, %d of the operator's rows (want 1)", a, verify.RowPrefix, b, c, d)
	}
}

// verifyObservers counts the observers of verify's runs registered on the
// server at addr, through a new handle (an open one keeps the registry it
// loaded).
func verifyObservers(t *testing.T, addr string) int {
	t.Helper()
	db, err := percolator.Open(context.Background(), percolator.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := db.ObserverStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range st.Observers {
		if workload.IsObserverUnder(o.Name, verify.RowPrefix) {
			n++
		}
	}
	return n
}

func rowsUnder(t *testing.T, db *percolator.DB, prefix, column string) int {
	t.Helper()
	var n int
	err := db.View(context.Background(), func(tx *percolator.Txn) error {
		kvs, err := tx.Scan(context.Background(), prefix, prefix+"\xff", column, 0)
		n = len(kvs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestVerifyBadInput: bad options exit 2 and start nothing; a reused --out
// is refused, so two runs' histories never mix.
func TestVerifyBadInput(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "history.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--workload", "nope"},
		{"--fault", "meteor"},
		{"--target", "cloud"},
		{"--duration", "0s"},
		{"--clients", "0"},
		{"--workers", "0"},
		{"--target", "server", "--server", "127.0.0.1:1"},
		{"--cleanup"},
		{"--matrix", "--server", "127.0.0.1:1"},
		{"--workload", "lock", "--server", "127.0.0.1:1"},
		{"--workload", "queue", "--server", "127.0.0.1:1"},
		{"--workload", "graph", "--server", "127.0.0.1:1"},
		{"--fault", "cut"},
		{"--fault", "powercut", "--target", "distributed"},
		{"--fault", "expire"},
		{"--matrix", "--fault", "powercut", "--target", "dir"},
		{"--out", used},
		{"extra"},
	} {
		text, code := runVerifyProc(t, nil, args...)
		if code != 2 {
			t.Errorf("verify %v: exit %d, want 2\n%s", args, code, text)
		}
	}
}

// TestFaultSuiteVerifyMatrix (PERCOLATOR_FAULT_SUITE=1) runs verify's
// matrix, every workload on every target that takes each fault set, a few
// seconds a cell, on a binary built without the race detector (the
// children are many): no cell may find a forbidden anomaly or fail to
// run. The sets are the matrix's own but for pause alone and the network
// faults alone, which the combined set holds.
func TestFaultSuiteVerifyMatrix(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("the matrix: set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	bin := buildPercolator(t, "", false)
	for _, faults := range []string{"kill", "powercut", "skew,expire", "kill,pause,cut,drop"} {
		out := filepath.Join(t.TempDir(), "matrix")
		cmd := exec.Command(bin, "verify", "--matrix", "--fault", faults, "--budget", "10s", "--out", out)
		text, err := cmd.CombinedOutput()
		t.Logf("--fault %s:\n%s", faults, text)
		if err != nil {
			t.Fatalf("verify --matrix --fault %s: %v", faults, err)
		}
	}
}

// buildPercolator builds the command with the build tags given (and the
// race detector, if race) into a temporary directory, skipping the test
// where there is no go command.
func buildPercolator(t *testing.T, tags string, race bool) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "percolator")
	args := []string{"build", "-tags", tags, "-o", bin}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command(goCmd, append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %q: %v\n%s", tags, err, out)
	}
	return bin
}
