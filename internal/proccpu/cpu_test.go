//go:build unix

package proccpu

import (
	"testing"
	"time"
)

// TestUsedGrows: the process's CPU time never goes back, and grows
// while the process computes.
func TestUsedGrows(t *testing.T) {
	first := Used()
	if first <= 0 {
		t.Fatalf("Used() = %v at start; a process that ran a test has used some CPU", first)
	}
	x := uint64(1)
	deadline := time.Now().Add(time.Minute)
	for Used() == first {
		if time.Now().After(deadline) {
			t.Fatalf("Used() stayed at %v through a minute of computing", first)
		}
		for range 1 << 16 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if later := Used(); later < first {
		t.Fatalf("Used() went back from %v to %v", first, later)
	}
	sink = x
}

var sink uint64
