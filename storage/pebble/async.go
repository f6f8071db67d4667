package pebble

import (
	"context"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// PrewriteAsync implements storage.AsyncPrewriter. The store keeps no
// observer registry: with observers given it answers ErrNoOnePhase (its
// owner, or the server, calls PrewriteAsyncGuarded with a check of its
// own).
func (s *Store) PrewriteAsync(ctx context.Context, checks []storage.AsyncCheck, observers *uint64) (uint64, []bool, error) {
	if observers != nil {
		return 0, nil, storage.ErrNoOnePhase
	}
	return s.PrewriteAsyncGuarded(ctx, checks, nil, nil)
}

// PrewriteAsyncGuarded is PrewriteAsync whose predicates conds, where not
// nil (conds[i] for checks[i]), may decide under the latches, as
// CheckAndMutateCond's (the owner's index), and whose guard, if not nil,
// runs once the timestamp is taken: an error from it applies nothing and
// is returned (the observer registry's version check).
//
// The order is CommitOnePhaseGuarded's, over every row of the call: the
// latches (in stripe order), the stripes marked as committing, the
// predicates, the timestamp, the guard, the write, the marks lowered,
// the latches released. A read whose timestamp is above the call's got
// it after the marks were raised; it finds its row's mark and waits for
// the latch before it reads, so it sees the locks written (txn/doc.go,
// "Async commit").
func (s *Store) PrewriteAsyncGuarded(ctx context.Context, checks []storage.AsyncCheck, conds []storage.Cond, guard func() error) (uint64, []bool, error) {
	if err := s.guard.enter(); err != nil {
		return 0, nil, err
	}
	defer s.guard.exit()
	st := s.stamper.Load()
	if st == nil {
		return 0, nil, storage.ErrNoOnePhase
	}
	if err := s.space.admit(ctx); err != nil {
		return 0, nil, err
	}
	if err := storage.CheckAsyncChecks(ctx, checks); err != nil {
		return 0, nil, err
	}
	rows := make([]storage.RowMutation, len(checks))
	for i := range checks {
		rows[i].Row = checks[i].Row
	}
	h, err := s.latches.lockRows(ctx, rows, true)
	if err != nil {
		return 0, nil, err
	}
	defer h.release()
	for _, i := range h.stripes {
		s.latches.markCommitting(i, 1)
	}
	// Lowered once the write is applied (visible), still under the
	// latches, before the sync is waited for (hold.release).
	h.before = func() {
		for _, i := range h.stripes {
			s.latches.markCommitting(i, -1)
		}
	}
	if err := s.latched(ctx); err != nil {
		return 0, nil, err
	}
	conflict := make([]bool, len(checks))
	applies := false
	for i := range checks {
		var cond storage.Cond
		if conds != nil {
			cond = conds[i]
		}
		if conflict[i], err = s.decide(checks[i].Row, cond, checks[i].Predicate); err != nil {
			return 0, nil, err
		}
		applies = applies || !conflict[i]
	}
	if !applies {
		return 0, conflict, nil
	}
	ts, err := (*st).Allocate(ctx, 1)
	if err != nil {
		return 0, nil, err
	}
	if guard != nil {
		if err := guard(); err != nil {
			return 0, nil, err
		}
	}
	write := make([]storage.RowMutation, 0, len(checks))
	for i := range checks {
		if conflict[i] {
			continue
		}
		ch := &checks[i]
		muts := make([]storage.Mutation, 0, len(ch.Mutations)+len(ch.Stamped))
		muts = storage.StampValues(append(muts, ch.Mutations...), ch.Stamped, ts)
		write = append(write, storage.RowMutation{Row: ch.Row, Mutations: muts})
	}
	if err := s.commitLocked(h, write, pebble.Sync, nil); err != nil {
		return 0, nil, err
	}
	return ts, conflict, nil
}

var _ storage.AsyncPrewriter = (*Store)(nil)
