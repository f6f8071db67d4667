package oracle

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The kill -9 test re-executes this binary as a child that allocates
	// until it is killed; see runKillChild.
	if path := os.Getenv(killChildEnv); path != "" {
		runKillChild(path)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testRand returns a generator seeded from ORACLE_TEST_SEED, or from the
// clock, and logs the seed so a failure can be replayed.
func testRand(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ORACLE_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ORACLE_TEST_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with ORACLE_TEST_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// checkNoLeak records the goroutine count; the returned function fails the
// test if the count does not come back down within a few seconds. Tests
// that use it must not run in parallel.
func checkNoLeak(t *testing.T) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
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
