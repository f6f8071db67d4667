package main

import (
	"bufio"
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/workload"
)

// TestMain lets the test binary run as the percolator command (for the
// subprocess tests) when PERCOLATOR_AS_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("PERCOLATOR_AS_MAIN") == "1" {
		main()
	}
	etcdtest.RunMemberIfChild() // a test's etcd in a process of its own
	// Under the race detector a process sleeps a second at exit by
	// default, to let other goroutines report; a child's races are
	// reported as they happen, and hundreds of children (the commands
	// these tests run, the docs' examples, verify's clients) exit here, so
	// they do not sleep, unless GORACE says otherwise. (The variable is
	// read at start: this process keeps its own setting.)
	if _, set := os.LookupEnv("GORACE"); !set {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PERCOLATOR_AS_MAIN=1")
	return cmd
}

// commandEnv is command with env added to the child's environment (the
// last of duplicate keys counts): how a parallel test, which may not call
// t.Setenv, sets a variable for its children.
func commandEnv(env []string, args ...string) *exec.Cmd {
	cmd := command(args...)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// emulatorEnv is the environment that points a child's Bigtable client
// at the emulator at addr.
func emulatorEnv(addr string) []string { return []string{"BIGTABLE_EMULATOR_HOST=" + addr} }

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestBankKill kills `bank` with SIGKILL at random moments and reopens the
// directory each time: totals are conserved, every transfer acknowledged
// before the kill is there, and the dead process's locks are resolved by
// the first reads at once (the TTL is an hour, the reads' deadline 30s).
func TestBankKill(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	const accounts = 40
	var acked []string
	for round := range 4 {
		cmd := command("bank", "--dir", dir, "--accounts", strconv.Itoa(accounts), "--workers", "8",
			"--duration", "60s", "--ack", "--quiet")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var round_acks []string
		done, first := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if row, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
					mu.Lock()
					if round_acks = append(round_acks, row); len(round_acks) == 1 {
						close(first)
					}
					mu.Unlock()
				}
			}
		}()
		if round == 0 {
			// The first run creates the accounts: kill it only once it
			// transfers, however slow the machine is.
			select {
			case <-first:
			case <-done:
				t.Fatal("bank exited before acknowledging a transfer")
			case <-time.After(2 * time.Minute):
				t.Fatal("bank acknowledged no transfer in 2 minutes")
			}
		}
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		_ = cmd.Wait()
		mu.Lock()
		acked = append(acked, round_acks...)
		mu.Unlock()
		t.Logf("round %d: %d transfers acknowledged before the kill", round, len(round_acks))
		checkBank(t, dir, accounts, acked)
	}
	if len(acked) == 0 {
		t.Fatal("no transfer was ever acknowledged: the test checked nothing")
	}
}

func checkBank(t *testing.T, dir string, accounts int, acked []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, LockTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkBankTotals(ctx, t, db, accounts, acked)
	locks, err := db.Locks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 0 {
		t.Fatalf("%d locks of the dead process survive the first reads, e.g. %s/%s", len(locks), locks[0].Row, locks[0].Column)
	}
}

// checkBankTotals checks the bank's total and that every acknowledged
// transfer is there, reading every transfer row (which resolves the locks
// left on them).
func checkBankTotals(ctx context.Context, t *testing.T, db *percolator.DB, accounts int, acked []string) {
	t.Helper()
	a, err := workload.AuditBank(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(accounts, 100); err != nil {
		t.Fatalf("after the kills: %v", err)
	}
	if err := workload.CheckTransfers(ctx, db, acked); err != nil {
		t.Fatal(err)
	}
}

func TestBankShortRun(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runCLI(t, "bank", "--dir", dir, "--accounts", "20", "--workers", "4", "--duration", "500ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "txn/s") || !strings.Contains(out, "wrong totals: 0") {
		t.Fatalf("summary missing: %q", out)
	}
	// A second run with another account count is refused.
	_, errOut, code = runCLI(t, "bank", "--dir", dir, "--accounts", "30", "--duration", "100ms")
	if code == 0 || !strings.Contains(errOut, "has 20 accounts") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

func TestDumpShowsProtocolColumns(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"$10", "$3"} {
		if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("Bob", "bal", []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	out, errOut, code := runCLI(t, "dump", "--dir", dir, "--row", "Bob")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Bob\n", "COLUMN", "DATA", "LOCK", "WRITE", "bal ", "put data@", `"$3"`, `"$10"`} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %q:\n%s", want, out)
		}
	}
	out, errOut, code = runCLI(t, "locks", "--dir", dir, "--resolve")
	if code != 0 || !strings.Contains(out, "0 locks") {
		t.Fatalf("locks: exit %d: %s", code, out)
	}
	if !strings.Contains(errOut, "listing locks: done, 0 in") {
		t.Errorf("locks --resolve shows no progress on stderr:\n%s", errOut)
	}
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"bank"},
		{"bank", "--dir", t.TempDir(), "--accounts", "1"},
		{"dump"},
		{"bench", "--only", "nope"},
		{"bank", "--bogus"},
		{"bank", "--dir", t.TempDir(), "--session-ttl", "5s"},
		{"bank", "--server", "127.0.0.1:1", "--session-ttl", "-1s"},
		{"bank", "--dir", t.TempDir(), "--retry-budget", "5s"},
		{"bank", "--server", "127.0.0.1:1", "--retry-budget", "-1s"},
		{"bank", "--bigtable", "p/i/t", "--etcd", "127.0.0.1:1", "--session-ttl", "1s"},
		{"bank", "--bigtable", "p/i/t", "--etcd", "127.0.0.1:1", "--session-ttl", "2500ms"},
		{"worker", "--bigtable", "p/i/t", "--etcd", "127.0.0.1:1", "--session-ttl", "soon"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}
