package pebble

import (
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// closeGuard lets Close wait for the calls in flight and turns later calls
// away with ErrClosed, without a lock on the hot path.
//
// A call increments active before it loads closed; Close stores closed
// before it loads active. Go atomics are sequentially consistent, so either
// the call sees closed or Close sees the call. An RWMutex was rejected: a
// Scan callback that calls back into the store would re-enter its read lock
// and deadlock against a waiting Close.
type closeGuard struct {
	closed atomic.Bool
	active atomic.Int64
}

func (g *closeGuard) enter() error {
	g.active.Add(1)
	if g.closed.Load() {
		g.active.Add(-1)
		return storage.ErrClosed
	}
	return nil
}

func (g *closeGuard) exit() { g.active.Add(-1) }

// close marks the guard closed and waits for the calls in flight. It
// reports false if the guard was already closed.
func (g *closeGuard) close() bool {
	if g.closed.Swap(true) {
		return false
	}
	for g.active.Load() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	return true
}
