// Package clockstores opens, for tests, one store of every backend with a
// clock of its own (storage.Clock): memory, Pebble, the single server over
// gRPC and the Bigtable emulator. The packages built on the store's clock
// (lock, queue) run their histories on each, and on some behind
// storagetest.Lossy (Lossy, Faults), seeded by Seed.
package clockstores

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// Backend opens a new, empty store of one backend for the test.
type Backend struct {
	Name string
	Open func(t *testing.T) storage.Store
}

// All returns every backend with a clock.
func All() []Backend {
	return []Backend{
		{"memory", func(t *testing.T) storage.Store { return memory.New() }},
		{"pebble", func(t *testing.T) storage.Store {
			st, err := pebble.Open(t.TempDir(), pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"server", func(t *testing.T) storage.Store {
			srv := servertest.Start(t, server.Options{}, "")
			return servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
		}},
		{"bigtable", func(t *testing.T) storage.Store { return bttesting.Open(t, bttesting.Start(t), "clockstores") }},
	}
}

// Faults are the fault rates of the lossy backends: every fault of
// storagetest.Lossy, often enough that a short history meets each many
// times.
var Faults = storagetest.LossyOptions{FailBefore: 0.04, LoseReply: 0.04, Duplicate: 0.04, ReadFail: 0.04}

// Lossy returns b with its store wrapped in storagetest.Lossy with the
// fault rates of opts, seeded by Seed. The store has the Lossy's
// SetEnabled and Stats methods.
func Lossy(b Backend, opts storagetest.LossyOptions) Backend {
	return Backend{Name: b.Name + "/lossy", Open: func(t *testing.T) storage.Store {
		opts.Seed = Seed(t)
		st, _ := storagetest.NewLossy(b.Open(t), opts)
		return st
	}}
}

// Seed returns the seed of a randomized test, logged so that a failure
// can be replayed: PERCOLATOR_SEED if set, else one from the clock.
func Seed(t testing.TB) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PERCOLATOR_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PERCOLATOR_SEED=%d replays it)", seed, seed)
	return seed
}
