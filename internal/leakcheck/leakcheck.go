// Package leakcheck finds goroutines a test leaves running: the check the
// packages that start goroutines run around their tests.
//
// Invariant: Check's function fails the test only when more goroutines
// than before are still running after a grace long enough for goroutines
// that are ending to end on a loaded machine; a leak is never missed for
// being slow to show.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// grace is how long the goroutine count may take to come back down.
const grace = 20 * time.Second

// Check records the goroutine count; the returned function fails the test
// if the count does not come back down within the grace, printing every
// goroutine's stack. Tests that use it must not run in parallel.
func Check(t testing.TB) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(grace)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("goroutine leak: %d goroutines, %d before\n%s", runtime.NumGoroutine(), before, buf)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
