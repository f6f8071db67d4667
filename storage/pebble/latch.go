package pebble

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/storage"
)

// latchStripes is the number of row latches. Rows hash onto stripes; two
// rows sharing a stripe only serialize, they never deadlock.
const latchStripes = 4096

// latches serialize the writes of a row: the predicate read, the batch and
// the durable commit of each write happen under its row's latch, as
// CockroachDB latches requests above Pebble. Reads take no latch: a pebble
// batch commits atomically, so a reader sees all of a write or none.
//
// A durable write marks its stripes as syncing for the time of its
// pebble commit: pebble publishes a batch to readers before its log sync
// returns, so a reader that returns a row first waits out a durable write
// in flight on the row's stripe (Store.settle).
type latches struct {
	seed maphash.Seed
	mu   [latchStripes]sync.Mutex
	// syncing counts the durable commits in flight per stripe. Invariant:
	// raised under the stripe's latch before the batch is committed, and
	// lowered after the commit returned (and after a failure was recorded).
	syncing [latchStripes]atomic.Int32
	// anySyncing counts them all, raised before and lowered after the
	// stripes' counts: a read of a store with no durable write in flight
	// skips hashing its row.
	anySyncing atomic.Int32
}

func newLatches() *latches { return &latches{seed: maphash.MakeSeed()} }

func (l *latches) stripe(row []byte) int {
	return int(maphash.Bytes(l.seed, row) % latchStripes)
}

// lockRow latches one row and returns the stripe to unlock.
func (l *latches) lockRow(row []byte) int {
	i := l.stripe(row)
	l.mu[i].Lock()
	return i
}

// lockRows latches every row in ascending stripe order (so two callers can
// never wait on each other in a cycle) and returns the stripes to unlock.
func (l *latches) lockRows(rows []storage.RowMutation) []int {
	stripes := make([]int, 0, len(rows))
	for i := range rows {
		stripes = append(stripes, l.stripe(rows[i].Row))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		l.mu[i].Lock()
	}
	return stripes
}

func (l *latches) unlock(stripes ...int) {
	for _, i := range stripes {
		l.mu[i].Unlock()
	}
}

// wait returns once no durable write that was in flight on row's stripe
// when it was called is still in flight: it takes and drops the latch,
// which the writer holds until its commit returned.
func (l *latches) wait(row []byte) {
	if l.anySyncing.Load() == 0 {
		return
	}
	i := l.stripe(row)
	if l.syncing[i].Load() > 0 {
		l.mu[i].Lock()
		l.mu[i].Unlock() //nolint:staticcheck // an empty critical section is the point
	}
}

// markSyncing raises (delta 1) or lowers (delta -1) the in-flight marks of
// the rows' stripes: the total first when raising, last when lowering, so
// anySyncing is never 0 while a stripe's mark is up.
func (l *latches) markSyncing(rows []storage.RowMutation, delta int32) {
	if delta > 0 {
		l.anySyncing.Add(1)
	}
	for i := range rows {
		l.syncing[l.stripe(rows[i].Row)].Add(delta)
	}
	if delta < 0 {
		l.anySyncing.Add(-1)
	}
}
