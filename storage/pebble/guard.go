package pebble

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// closeGuard lets Close wait for the calls in flight and turns later calls
// away with ErrClosed, without a lock on the hot path. It also holds the
// store's failure: once a write could not be made durable, every call
// fails with it (storage.ErrFailed).
//
// A call increments active before it loads closed; Close stores closed
// before it loads active. Go atomics are sequentially consistent, so either
// the call sees closed or Close sees the call. An RWMutex was rejected: a
// Scan callback that calls back into the store would re-enter its read lock
// and deadlock against a waiting Close.
type closeGuard struct {
	closed atomic.Bool
	active atomic.Int64
	// failed is the store's sticky failure, nil while healthy. Invariant:
	// set before the row marks of the failed write are lifted (settle).
	failed atomic.Pointer[error]
}

func (g *closeGuard) enter() error {
	g.active.Add(1)
	if g.closed.Load() {
		g.active.Add(-1)
		return storage.ErrClosed
	}
	if err := g.failure(); err != nil {
		g.active.Add(-1)
		return err
	}
	return nil
}

func (g *closeGuard) exit() { g.active.Add(-1) }

// fail records cause as the store's failure; the first cause stands.
func (g *closeGuard) fail(cause error) {
	err := fmt.Errorf("pebble: %w: %v", storage.ErrFailed, cause)
	g.failed.CompareAndSwap(nil, &err)
}

// failure returns the store's failure, or nil.
func (g *closeGuard) failure() error {
	if p := g.failed.Load(); p != nil {
		return *p
	}
	return nil
}

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
