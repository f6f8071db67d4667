package pebble

import (
	"context"
	"hash/maphash"
	"slices"
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
//
// Every wait honours the caller's context: a latch is a one-slot channel,
// not a mutex, so that a write queued behind a commit whose log sync
// hangs (a stalled disk) and a read settling behind it return the
// context's error when it ends, holding nothing and having changed
// nothing. (A sync.Mutex cannot be given up on: a Get with a 200ms
// deadline waited as long as the sync did.) The commit holding the latch
// cannot be abandoned: its batch is already published; it returns when
// pebble does.
type latches struct {
	seed maphash.Seed
	// mu are the stripes' latches: a stripe is held while its channel
	// holds a token. Waiters queue in FIFO order on the send.
	mu [latchStripes]chan struct{}
	// syncing counts the durable commits in flight per stripe. Invariant:
	// raised under the stripe's latch before the batch is committed, and
	// lowered after the commit returned (and after a failure was recorded).
	syncing [latchStripes]atomic.Int32
	// anySyncing counts them all, raised before and lowered after the
	// stripes' counts: a read of a store with no durable write in flight
	// skips hashing its row.
	anySyncing atomic.Int32
	// committing counts the one-phase commits in flight per stripe
	// (onephase.go). Invariant: raised under the stripe's latch before
	// the commit's timestamp is taken, lowered after its write returned
	// (visible and durable), still under the latch.
	committing [latchStripes]atomic.Int32
	// anyCommitting counts them all, raised first and lowered last.
	anyCommitting atomic.Int32
}

func newLatches() *latches {
	l := &latches{seed: maphash.MakeSeed()}
	for i := range l.mu {
		l.mu[i] = make(chan struct{}, 1)
	}
	return l
}

func (l *latches) stripe(row []byte) int {
	return int(maphash.Bytes(l.seed, row) % latchStripes)
}

// acquire takes stripe i's latch, or returns ctx's error if ctx ends
// first (the latch not taken).
func (l *latches) acquire(ctx context.Context, i int) error {
	select {
	case l.mu[i] <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.mu[i] <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockRow latches one row and returns the stripe to unlock; or ctx's
// error, holding nothing.
func (l *latches) lockRow(ctx context.Context, row []byte) (int, error) {
	i := l.stripe(row)
	return i, l.acquire(ctx, i)
}

// lockRows latches every row in ascending stripe order (so two callers can
// never wait on each other in a cycle) and returns the stripes to unlock;
// or ctx's error, having released the stripes it took.
func (l *latches) lockRows(ctx context.Context, rows []storage.RowMutation) ([]int, error) {
	stripes := make([]int, 0, len(rows))
	for i := range rows {
		stripes = append(stripes, l.stripe(rows[i].Row))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for n, i := range stripes {
		if err := l.acquire(ctx, i); err != nil {
			l.unlock(stripes[:n]...)
			return nil, err
		}
	}
	return stripes, nil
}

func (l *latches) unlock(stripes ...int) {
	for _, i := range stripes {
		<-l.mu[i]
	}
}

// wait returns once no durable write that was in flight on row's stripe
// when it was called is still in flight: it takes and drops the latch,
// which the writer holds until its commit returned. It returns ctx's
// error if ctx ends first.
func (l *latches) wait(ctx context.Context, row []byte) error {
	if l.anySyncing.Load() == 0 {
		return nil
	}
	i := l.stripe(row)
	if l.syncing[i].Load() == 0 {
		return nil
	}
	return l.pass(ctx, i)
}

// pass takes and drops stripe i's latch: it returns once the write that
// held it when called is done, or ctx's error.
func (l *latches) pass(ctx context.Context, i int) error {
	if err := l.acquire(ctx, i); err != nil {
		return err
	}
	l.unlock(i)
	return nil
}

// markCommitting raises (delta 1) or lowers (delta -1) stripe i's count
// of one-phase commits in flight.
func (l *latches) markCommitting(i int, delta int32) {
	if delta > 0 {
		l.anyCommitting.Add(1)
	}
	l.committing[i].Add(delta)
	if delta < 0 {
		l.anyCommitting.Add(-1)
	}
}

// awaitCommit returns once no one-phase commit that was in flight on
// row's stripe when it was called is still in flight (it takes and drops
// the latch, which the commit holds until its write returned), or ctx's
// error. A read calls it before reading: a commit whose timestamp was
// handed out before the reader's was marked before, so the reader finds
// its write (txn/doc.go, "One-phase commit").
func (l *latches) awaitCommit(ctx context.Context, row []byte) error {
	if l.anyCommitting.Load() == 0 {
		return nil
	}
	return l.awaitStripeCommit(ctx, l.stripe(row))
}

// awaitAllCommits is awaitCommit for every row: a scan's.
func (l *latches) awaitAllCommits(ctx context.Context) error {
	if l.anyCommitting.Load() == 0 {
		return nil
	}
	for i := range l.committing {
		if err := l.awaitStripeCommit(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (l *latches) awaitStripeCommit(ctx context.Context, i int) error {
	if l.committing[i].Load() == 0 {
		return nil
	}
	return l.pass(ctx, i)
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
