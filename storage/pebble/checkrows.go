package pebble

import (
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
	return s.checkRows(ctx, checks, nil, nil, sync)
}

// CheckAndMutateThen runs check as CheckAndMutate would and, when its
// predicate matched, applies then (other rows) in the same durable batch.
// guard, if not nil, runs once every row is latched and before anything is
// read: an error from it applies nothing and is returned (the server's
// epoch check).
func (s *Store) CheckAndMutateThen(ctx context.Context, check storage.RowCheck, then []storage.RowMutation, guard func() error) (bool, error) {
	matched, err := s.checkRows(ctx, []storage.RowCheck{check}, then, guard, pebble.Sync)
	if err != nil {
		return false, err
	}
	return matched[0], nil
}

// checkRows is CheckAndMutateRows, with then applied when checks[0]
// matched (CheckAndMutateThen) and guard run under the latches.
func (s *Store) checkRows(ctx context.Context, checks []storage.RowCheck, then []storage.RowMutation, guard func() error, sync *pebble.WriteOptions) ([]bool, error) {
	if err := s.guard.enter(); err != nil {
		return nil, err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return nil, err
	}
	if err := storage.CheckRowChecks(ctx, checks, then); err != nil {
		return nil, err
	}
	if len(checks) == 0 {
		return nil, nil
	}
	rows := make([]storage.RowMutation, len(checks), len(checks)+len(then))
	for i := range checks {
		rows[i].Row = checks[i].Row
	}
	h, err := s.latches.lockRows(ctx, append(rows, then...), sync == pebble.Sync)
	if err != nil {
		return nil, err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return nil, err
	}
	if guard != nil {
		if err := guard(); err != nil {
			return nil, err
		}
	}
	matched := make([]bool, len(checks))
	write := false
	for i := range checks {
		cells, err := s.readRow(checks[i].Row, s.prune(checks[i].Row, checks[i].Predicate), true)
		if err != nil {
			return nil, err
		}
		matched[i] = len(cells) > 0
		if matched[i] && len(checks[i].Unless) > 0 {
			if matched[i], err = s.selectsNone(checks[i].Row, checks[i].Unless); err != nil {
				return nil, err
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
	if !write {
		return matched, nil
	}
	return matched, s.commitLocked(h, rows, sync, nil)
}
