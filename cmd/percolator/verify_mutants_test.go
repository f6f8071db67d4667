package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/internal/mutant"
)

// TestVerifyMutants proves the checkers on the protocol broken in known
// ways: a binary built with the mutants' tag (and the race detector when
// the tests run with it) runs verify with each mutant on, and verify must
// find a forbidden anomaly (exit 1) in at most three short runs (a fault
// lands at random: a run may miss the window a break needs); the same
// binary with no mutant on passes.
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
		{"", []string{"--workload", "bank", "--async-commit", "--duration", "3s"}},
		{mutant.AsyncSkipSecondary, []string{"--workload", "bank", "--async-commit", "--duration", "3s"}},
		{mutant.StaleRange, []string{"--target", "server", "--workload", "register", "--duration", "5s", "--clients", "3"}},
		{mutant.SkipRollback, []string{"--target", "distributed", "--workload", "observer", "--fault", "none", "--duration", "6s"}},
	} {
		name := c.mutant
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				out := filepath.Join(t.TempDir(), "out")
				text, code := runMutantVerify(t, bin, c.mutant, append(c.args, "--out", out)...)
				switch {
				case c.mutant == "" && code == 0:
					return
				case c.mutant == "":
					t.Fatalf("no mutant: exit %d\n%s", code, text)
				case code == 1 && strings.Contains(text, "INVALID"):
					t.Logf("found on run %d:\n%s", attempt, text)
					return
				case code != 0 || attempt == 3:
					t.Fatalf("run %d: exit %d, want 1 (a forbidden anomaly)\n%s", attempt, code, text)
				}
			}
		})
	}
}

// runMutantVerify runs the mutants' binary's verify with PERCOLATOR_MUTANT
// set (every process verify starts inherits it).
func runMutantVerify(t *testing.T, bin, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"verify"}, args...)...)
	cmd.Env = append(os.Environ(), mutant.EnvVar+"="+name)
	return runExit(t, cmd)
}
