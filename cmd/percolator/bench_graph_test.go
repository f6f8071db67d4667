package main

import (
	"strings"
	"testing"
)

// TestBenchGraph: the graph figure runs every label kind in both
// scenarios and prints the table and the two ratios.
func TestBenchGraph(t *testing.T) {
	t.Parallel() // it checks what the figure prints, not how fast it is: another test may run meanwhile
	out, errOut, code := runCLI(t, "bench", "--dir", t.TempDir(), "--only", "graph", "--duration", "200ms", "--writers", "8")
	checkBenchExit(t, out, errOut, code)
	for _, want := range []string{"10           strong", "10           weak", "10           txn", "1000000      strong", "strong vs weak without contention", "txn vs strong under contention"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchLock: the lock figure prints both lines.
func TestBenchLock(t *testing.T) {
	t.Parallel() // it checks what the figure prints, not how fast it is: another test may run meanwhile
	out, errOut, code := runCLI(t, "bench", "--dir", t.TempDir(), "--only", "lock", "--duration", "400ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"uncontended acquire+release p50", "32 contenders"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
