package pebble

import (
	"bytes"
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/seed-992972ee/percolator/storage"
)

// CheckAndMutateRows runs each check as CheckAndMutate would, every row
// under its latch (all taken, in stripe order, before any predicate is
// read), and commits the branches chosen in one batch: durable, or,
// deferred, without waiting for the WAL sync (CheckAndMutateDeferred).
// matched[i] reports checks[i]'s branch. The rows must be distinct
// (storage.CheckRowChecks).
func (s *Store) CheckAndMutateRows(ctx context.Context, checks []storage.RowCheck, deferred bool) ([]bool, error) {
	sync := pebble.Sync
	if deferred {
		sync = pebble.NoSync
	}
	matched, _, err := s.checkRows(ctx, checks, nil, nil, nil, sync)
	return matched, err
}

// CheckAndMutateThen runs check as CheckAndMutate would and, when its
// predicate matched, applies then (other rows) in the same durable batch.
// guard, if not nil, runs once every row is latched and before anything is
// read: an error from it applies nothing and is returned (the server's
// epoch check).
func (s *Store) CheckAndMutateThen(ctx context.Context, check storage.RowCheck, then []storage.RowMutation, guard func() error) (bool, error) {
	matched, _, err := s.checkRows(ctx, []storage.RowCheck{check}, then, nil, guard, pebble.Sync)
	if err != nil {
		return false, err
	}
	return matched[0], nil
}

// CommitInEpochGuarded is CheckAndMutateThen whose commit timestamp the
// store takes from its stamper (SetStamper) under the latches, once the
// predicate matched, and writes stamped at (storage.EpochStamper; the
// server's CommitInEpoch, guard its epoch check, run under the latches
// before anything is read; stampGuard, if not nil, once the timestamp is
// taken: its error applies nothing and is returned, the observer
// registry's version check). It returns the timestamp, 0 when the
// predicate did not match. ErrNoOnePhase: no stamper is attached.
//
// The order is what txn/doc.go, "Durability over RPC", argues: every
// row latched, the guard, the predicate and its unless, the timestamp,
// the stamp guard, the write, the latches released. No committing mark is needed, unlike
// a one-phase commit's: the primary's lock stays until the write, so a
// reader whose timestamp is above the commit's finds the lock or the
// commit record, and a push of the lock waits for the latch, when the
// lock is gone.
func (s *Store) CommitInEpochGuarded(ctx context.Context, check storage.RowCheck, then, stamped []storage.RowMutation, guard, stampGuard func() error) (uint64, bool, error) {
	if err := storage.CheckStamped(check, then, stamped); err != nil {
		return 0, false, err
	}
	if s.stamper.Load() == nil {
		return 0, false, storage.ErrNoOnePhase
	}
	stamp := &stamping{stamped: stamped, guard: stampGuard}
	matched, ts, err := s.checkRows(ctx, []storage.RowCheck{check}, then, stamp, guard, pebble.Sync)
	if err != nil {
		return 0, false, err
	}
	return ts, matched[0], nil
}

// stamping is what CommitInEpochGuarded adds to a check: the mutations
// written at the timestamp taken, and the guard run once it is.
type stamping struct {
	stamped []storage.RowMutation
	guard   func() error
}

// checkRows is CheckAndMutateRows, with then applied when checks[0]
// matched (CheckAndMutateThen) and guard run under the latches; with
// stamp, also its mutations at a timestamp taken from the stamper once
// checks[0] matched (CommitInEpochGuarded), which it returns.
func (s *Store) checkRows(ctx context.Context, checks []storage.RowCheck, then []storage.RowMutation, stamp *stamping, guard func() error, sync *pebble.WriteOptions) ([]bool, uint64, error) {
	if err := s.guard.enter(); err != nil {
		return nil, 0, err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return nil, 0, err
	}
	if err := storage.CheckRowChecks(ctx, checks, then); err != nil {
		return nil, 0, err
	}
	if len(checks) == 0 {
		return nil, 0, nil
	}
	rows := make([]storage.RowMutation, len(checks), len(checks)+len(then))
	for i := range checks {
		rows[i].Row = checks[i].Row
	}
	h, err := s.latches.lockRows(ctx, append(rows, then...), sync == pebble.Sync)
	if err != nil {
		return nil, 0, err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return nil, 0, err
	}
	if guard != nil {
		if err := guard(); err != nil {
			return nil, 0, err
		}
	}
	matched := make([]bool, len(checks))
	write := false
	for i := range checks {
		cells, err := s.readRow(checks[i].Row, s.prune(checks[i].Row, checks[i].Predicate), true)
		if err != nil {
			return nil, 0, err
		}
		matched[i] = len(cells) > 0
		if matched[i] && len(checks[i].Unless) > 0 {
			if matched[i], err = s.selectsNone(checks[i].Row, checks[i].Unless); err != nil {
				return nil, 0, err
			}
		}
		rows[i].Mutations = checks[i].IfFalse
		if matched[i] {
			rows[i].Mutations = checks[i].IfTrue
		}
		write = write || len(rows[i].Mutations) > 0
	}
	if matched[0] && len(then) > 0 {
		rows, write = append(rows, then...), true
	}
	var ts uint64
	if matched[0] && stamp != nil {
		// Under the latches, after the predicate: above the timestamp of
		// every push the unless read (each handed out before its push was
		// written), and of every reader that may read these rows' old
		// values without meeting the lock.
		st := s.stamper.Load()
		if st == nil {
			return nil, 0, storage.ErrNoOnePhase
		}
		if ts, err = (*st).Allocate(ctx, 1); err != nil {
			return nil, 0, err
		}
		if stamp.guard != nil {
			if err := stamp.guard(); err != nil {
				return nil, 0, err
			}
		}
		rows, write = stampRows(rows, stamp.stamped, ts), true
	}
	if !write {
		return matched, 0, nil
	}
	return matched, ts, s.commitLocked(h, rows, sync, nil)
}

// stampRows puts each row's stamped mutations, at ts, before its own:
// the commit records before the removal of their locks, as a client's
// commit mutations order them. Every row of stamped is one of rows'
// (storage.CheckStamped).
func stampRows(rows, stamped []storage.RowMutation, ts uint64) []storage.RowMutation {
	for _, sm := range stamped {
		for i := range rows {
			if bytes.Equal(rows[i].Row, sm.Row) {
				muts := storage.AppendStamped(make([]storage.Mutation, 0, len(sm.Mutations)+len(rows[i].Mutations)), sm.Mutations, ts)
				rows[i].Mutations = append(muts, rows[i].Mutations...)
				break
			}
		}
	}
	return rows
}
