package oracle

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/leakcheck"
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

// checkNoLeak is leakcheck.Check.
func checkNoLeak(t *testing.T) func() { return leakcheck.Check(t) }
