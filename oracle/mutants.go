package oracle

import (
	"context"
	"sync/atomic"
)

// The oracle's two mutants (internal/mutant): deliberate bugs that
// `percolator verify` must catch, hooked in client.go and live only in a
// binary built with -tags percolator_mutants.

// repeatEvery is how often the repeat-timestamp mutant strikes: one call
// in repeatEvery.
const repeatEvery = 50

// repeater is the repeat-timestamp mutant: one call in repeatEvery gets
// the timestamp that the Client handed out before it again, breaking
// DESIGN.md's invariant 1 (a client never reuses a timestamp; this
// package's invariant 7). Safe for concurrent use.
type repeater struct {
	calls atomic.Uint64
	prev  atomic.Uint64
}

// next returns ts, or, on every repeatEvery-th call, the timestamp
// handed out before.
func (r *repeater) next(ts uint64) uint64 {
	prev := r.prev.Swap(ts)
	if r.calls.Add(1)%repeatEvery == 0 && prev != 0 {
		return prev
	}
	return ts
}

// staleAhead is how many timestamps the stale-range mutant fetches beyond
// what a request asks.
const staleAhead = 256

// aheadBackend is the stale-range mutant: the design doc.go's "Batching"
// rejects. It fetches staleAhead timestamps more than a request asks and
// serves later requests from them, so a caller can get a timestamp
// allocated long before it asked, below one that another Client handed
// out meanwhile. That breaks DESIGN.md's invariant 1's batching rule
// (this package's invariant 6), and with it invariant 2: the snapshot of
// a reader that started after a committer's locks misses the commit.
//
// Concurrency: the Client calls a Backend from one goroutine at a time
// (Backend), which owns next and end.
type aheadBackend struct {
	backend Backend
	// next..end-1 are fetched and not yet handed out.
	next, end uint64
}

// Allocate implements Backend.
func (a *aheadBackend) Allocate(ctx context.Context, n int) (uint64, error) {
	if a.end-a.next < uint64(n) {
		first, err := a.backend.Allocate(ctx, n+staleAhead)
		if err != nil {
			return 0, err
		}
		a.next, a.end = first, first+uint64(n+staleAhead)
	}
	first := a.next
	a.next += uint64(n)
	return first, nil
}
