package main

import (
	"cmp"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/mutant"
)

// TestVerifyMutants proves the checkers on the protocol broken in known
// ways: a binary built with the mutants' tag (and the race detector when
// the tests run with it) runs verify with each mutant on, and verify must
// find a forbidden anomaly (exit 1) in at most three short runs, each
// twice as long as the one before (a fault lands at random: a run may
// miss the window a break needs); the same binary with no mutant on
// passes. A run that a busy machine left too few operations does not
// count: it is run again for twice as long, a fault half as often, so
// the verdict does not depend on the machine's speed.
//
// skip-rollback shows only where notifications live in rows of their own
// (the distributed target): a clear without its fence lets a late
// prewrite commit a change no observer follows. Elsewhere the commit
// point's session check and the primary-first prewrite order mask it
// under every nemesis verify has (txn's tagged tests show it breaks
// invariant 5 in-process).
func TestVerifyMutants(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	bin := buildPercolator(t, "percolator_mutants", raceEnabled)
	// The operations a mutant's run needs to count, where minMutantOps is
	// too few: repeat-timestamp fires once in 50 oracle calls, a transfer
	// makes two, and the bank's readers on the embedded store none (their
	// snapshots start above the newest commit), so a busy machine's 56
	// operations could all miss it. push-secondary and
	// async-skip-secondary break only where a reader meets a transaction
	// between its prewrites and its commit: an idle machine's 3 s run
	// makes 400 to 1,400 transfers and finds dozens of anomalies, while
	// a machine running a second test suite beside this one left runs of
	// 39 to 91 that found none.
	minOps := map[string]int{mutant.RepeatTimestamp: 300, mutant.PushSecondary: 200, mutant.AsyncSkipSecondary: 150}
	for _, c := range []struct {
		mutant string
		args   []string
	}{
		{"", []string{"--workload", "bank", "--duration", "3s"}},
		{"", []string{"--workload", "bank", "--read-through-locks", "--duration", "3s"}},
		{mutant.SkipLockCheck, []string{"--workload", "bank", "--duration", "3s"}},
		{mutant.RepeatTimestamp, []string{"--workload", "bank", "--duration", "3s"}},
		{mutant.SecondariesFirst, []string{"--workload", "bank", "--duration", "4s", "--interval", "300ms"}},
		{mutant.PushSecondary, []string{"--workload", "bank", "--read-through-locks", "--duration", "3s"}},
		{mutant.OnePhaseEarlyTS, []string{"--workload", "register", "--duration", "3s"}},
		{mutant.StableUnacked, []string{"--workload", "register", "--duration", "3s"}},
		{"", []string{"--workload", "bank", "--async-commit", "--duration", "3s"}},
		{mutant.AsyncSkipSecondary, []string{"--workload", "bank", "--async-commit", "--duration", "3s"}},
		// No faults: the server's restarts, every 2 s, left a race build
		// on a busy machine too few transfers to meet the window.
		{mutant.CommitStampEarly, []string{"--target", "server", "--workload", "bank", "--read-through-locks", "--fault", "none", "--duration", "3s"}},
		{mutant.FreshReadStale, []string{"--target", "server", "--workload", "register", "--duration", "5s", "--clients", "3"}},
		{mutant.StaleRange, []string{"--target", "server", "--workload", "register", "--duration", "5s", "--clients", "3"}},
		{mutant.SkipRollback, []string{"--target", "distributed", "--workload", "observer", "--fault", "none", "--duration", "6s"}},
	} {
		name := c.mutant
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			args := slices.Clone(c.args)
			for attempt, slow := 1, 0; ; {
				out := filepath.Join(t.TempDir(), "out")
				text, code := runMutantVerify(t, bin, c.mutant, append(args, "--out", out)...)
				switch {
				case c.mutant == "" && code == 0:
					return
				case c.mutant == "":
					t.Fatalf("no mutant: exit %d\n%s", code, text)
				case code == 1 && strings.Contains(text, "INVALID"):
					t.Logf("found on run %d:\n%s", attempt, text)
					return
				case code == 0 && okOperations(text) < cmp.Or(minOps[c.mutant], minMutantOps) && slow < maxSlowRuns:
					// Too few operations to tell: the machine was too busy
					// for the run's time, not the checker blind. Run again,
					// twice as long, a fault half as often; this run does
					// not count.
					slow++
					args = slowDown(t, args)
					t.Logf("run %d: %d operations, too few to tell; again for %s, a fault every %s", attempt, okOperations(text), flagArg(args, "--duration"), flagArg(args, "--interval"))
				case code != 0 || attempt == 3:
					t.Fatalf("run %d: exit %d, want 1 (a forbidden anomaly)\n%s", attempt, code, text)
				default:
					// A fault lands at random: the next run is twice as
					// long, with twice the faults to meet the window.
					args = doubleDuration(t, args)
					t.Logf("run %d: nothing found in %d operations; again for %s, a fault every %s", attempt, okOperations(text), flagArg(args, "--duration"), flagArg(args, "--interval"))
					attempt++
				}
			}
		})
	}
}

// A mutant's run that completed fewer than minMutantOps operations tells
// nothing (on an idle machine they complete 50 to 250): it is run again
// with twice the duration, at most maxSlowRuns times, and only the runs
// with enough operations count toward the three.
const (
	minMutantOps = 20
	maxSlowRuns  = 3
)

// okOperations is the count of operations that completed, from verify's
// "operations: N ok, ..." line (0 if it has none).
func okOperations(text string) int {
	m := regexp.MustCompile(`operations: (\d+) ok`).FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// doubleDuration returns args with the value of --duration doubled.
func doubleDuration(t *testing.T, args []string) []string {
	t.Helper()
	return doubleFlags(t, slices.Clone(args), "--duration")
}

// slowDown returns args with the values of --duration and --interval
// (the nemesis's mean time between faults, verify's default if not
// given) doubled: on a machine too busy for the run, a client restarted
// after a kill could take longer to start than the time to the next
// kill, and a longer run alone would be no less starved.
func slowDown(t *testing.T, args []string) []string {
	t.Helper()
	args = slices.Clone(args)
	if !slices.Contains(args, "--interval") {
		args = append(args, "--interval", defaultFaultInterval.String())
	}
	return doubleFlags(t, args, "--duration", "--interval")
}

// doubleFlags doubles the durations flags name in args, in place.
func doubleFlags(t *testing.T, args []string, flags ...string) []string {
	t.Helper()
	for _, flag := range flags {
		i := slices.Index(args, flag)
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("no %s in %q", flag, args)
		}
		d, err := time.ParseDuration(args[i+1])
		if err != nil {
			t.Fatal(err)
		}
		args[i+1] = (2 * d).String()
	}
	return args
}

// defaultFaultInterval is verify's --interval when none is given
// (internal/verifycmd).
const defaultFaultInterval = time.Second

// flagArg is the value of flag in args.
func flagArg(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// runMutantVerify runs the mutants' binary's verify with PERCOLATOR_MUTANT
// set (every process verify starts inherits it).
func runMutantVerify(t *testing.T, bin, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"verify"}, args...)...)
	cmd.Env = append(os.Environ(), mutant.EnvVar+"="+name)
	return runExit(t, cmd)
}

// TestMutantRunHelpers: the operation count is read from verify's
// summary; --duration doubles, or --duration and --interval (the latter
// from verify's default where not given), without touching the caller's
// args.
func TestMutantRunHelpers(t *testing.T) {
	if n := okOperations("VALID: no forbidden anomaly\noperations: 1 ok, 0 failed, 0 unknown (2 events)\n"); n != 1 {
		t.Errorf("okOperations = %d, want 1", n)
	}
	if n := okOperations("no summary"); n != 0 {
		t.Errorf("okOperations without a summary = %d, want 0", n)
	}
	args := []string{"--workload", "bank", "--duration", "4s", "--interval", "300ms"}
	got := slowDown(t, args)
	if flagArg(got, "--duration") != "8s" || flagArg(got, "--interval") != "600ms" || flagArg(args, "--duration") != "4s" || flagArg(args, "--interval") != "300ms" {
		t.Errorf("slowed %q down into %q", args, got)
	}
	args = []string{"--workload", "bank", "--duration", "3s"}
	if got = slowDown(t, args); flagArg(got, "--duration") != "6s" || flagArg(got, "--interval") != "2s" || len(args) != 4 {
		t.Errorf("slowed %q down into %q", args, got)
	}
	if got = doubleDuration(t, args); flagArg(got, "--duration") != "6s" || slices.Contains(got, "--interval") || flagArg(args, "--duration") != "3s" {
		t.Errorf("doubled %q into %q", args, got)
	}
}
