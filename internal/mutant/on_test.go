//go:build percolator_mutants

package mutant

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestSet(t *testing.T) {
	restore := Set(StaleRange)
	if !On(StaleRange) || On(SkipRollback) {
		t.Fatal("Set(stale-range) did not make exactly it active")
	}
	inner := Set()
	if On(StaleRange) {
		t.Fatal("Set() left stale-range active")
	}
	inner()
	if !On(StaleRange) {
		t.Fatal("restore did not bring stale-range back")
	}
	restore()
	defer func() {
		if recover() == nil {
			t.Error("Set of an unknown name did not panic")
		}
	}()
	Set("no-such-mutant")
}

// TestUnknownNameFailsAtStart runs this test binary with a misspelt
// mutant: it must exit at init, naming the mutants it knows.
func TestUnknownNameFailsAtStart(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvVar+"=skip-lock-check,skip-rollbak")
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); !ok {
		t.Fatalf("the binary did not fail: %v\n%s", err, out)
	}
	for _, want := range []string{EnvVar, `"skip-rollbak"`, SkipRollback, StaleRange} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the message lacks %s:\n%s", want, out)
		}
	}
}
