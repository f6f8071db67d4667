package txn

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/internal/mutant"
)

// The snapshot of a read-only transaction on a store this client owns
// (doc.go, "Read-only snapshots"): the newest commit it acknowledged or
// a read of it returned, plus one, rather than a fresh timestamp, so a
// reader does not wait for the log sync of a commit point that nobody
// has yet been told of.

// stableTS tracks, on a client with the index, the newest commit_ts this
// client acknowledged (a Commit that returned nil) or that one of its
// reads returned (the record it chose), or 0 before the first. Only
// rises.
type stableTS struct {
	newest atomic.Uint64
	// floored: newest is at least one below a fresh timestamp this client
	// took, so at least every commit acknowledged before the client was
	// made (by an earlier process on the store). Until then no snapshot
	// starts above newest: reads could have raised it to an old commit's.
	floored atomic.Bool
}

// floor raises newest to one below ts, a fresh timestamp, the first time.
func (s *stableTS) floor(ts uint64) {
	if s.floored.Load() {
		return
	}
	s.raise(ts - 1)
	s.floored.Store(true)
}

// raise makes the newest at least ts.
func (s *stableTS) raise(ts uint64) {
	for {
		cur := s.newest.Load()
		if cur >= ts || s.newest.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// sawCommit raises the newest commit_ts: a commit about to be
// acknowledged, or a record a read is about to return. Without the index
// no read-only snapshot is taken from it, and it does nothing.
func (c *Client) sawCommit(ts uint64) {
	if c.index == nil || ts == 0 {
		return
	}
	c.stable.raise(ts)
}

// acked is sawCommit for a commit at ts that is about to return nil.
func (c *Client) acked(ts uint64) {
	if mutant.On(mutant.StableUnacked) {
		return // breaks real-time order: a read after the commit may miss it
	}
	c.sawCommit(ts)
}

// stableStart returns the start timestamp of a read-only transaction
// that needs no fresh one: one above the newest commit this client
// acknowledged or returned, and at or above the safe point, so that its
// reads do not fail as too old; false when there is none (no fresh
// timestamp taken yet, the option off, no index, or below the safe
// point).
func (c *Client) stableStart(ctx context.Context) (uint64, bool) {
	if c.index == nil || c.opts.freshReadOnly {
		return 0, false
	}
	if !c.stable.floored.Load() {
		return 0, false
	}
	newest := c.stable.newest.Load()
	sp, err := c.safePoints.get(ctx, c.store, c.opts.safePointCache)
	if err != nil || newest+1 < sp {
		return 0, false
	}
	return newest + 1, true
}

// fromStable runs the first read of t, whose snapshot may be one that
// stableStart gave (t.stable): if that read finds it below the safe point
// (a collector moved the safe point up since this client last looked),
// t takes a fresh start timestamp and reads again. Nothing was read at
// the old snapshot, so no read of t sees two.
func (t *Txn) fromStable(ctx context.Context, read func() error) error {
	if !t.stable {
		return read()
	}
	err := read()
	if errors.Is(err, ErrSnapshotTooOld) {
		if serr := t.restartFresh(ctx); serr != nil {
			return fmt.Errorf("txn: start timestamp after a snapshot below the safe point: %w", serr)
		}
		err = read()
	}
	t.stable = false
	return err
}

// restartFresh replaces t's start timestamp, one stableStart gave and not
// read at yet, with a fresh one from the oracle (t.startTS is 0 if that
// fails).
func (t *Txn) restartFresh(ctx context.Context) error {
	t.c.active.remove(t.startTS)
	t.startTS = 0
	t.stable = false
	return t.startFresh(ctx)
}
