// Package clockstores opens, for tests, one store of every backend with a
// clock of its own (storage.Clock): memory, Pebble, the single server over
// gRPC and the Bigtable emulator. The packages built on the store's clock
// (lock, queue) run their histories on each.
package clockstores

import (
	"testing"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/remote"
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
