package pebble

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// SetStamper attaches the oracle of the process that owns the store
// (oracle.Allocator), which makes CommitOnePhase available. The DB and
// the server attach their store allocator once it is open; nil detaches.
func (s *Store) SetStamper(st storage.Stamper) {
	if st == nil {
		s.stamper.Store(nil)
		return
	}
	s.stamper.Store(&st)
}

// CommitOnePhase implements storage.OnePhaser. The store keeps no
// observer registry: with observers given it answers ErrNoOnePhase (its
// owner, or the server, calls CommitOnePhaseGuarded with a check of its
// own).
func (s *Store) CommitOnePhase(ctx context.Context, row []byte, predicate storage.Filter, mutations, stamped []storage.Mutation, observers *uint64) (uint64, bool, error) {
	if observers != nil {
		return 0, false, storage.ErrNoOnePhase
	}
	return s.CommitOnePhaseGuarded(ctx, row, nil, predicate, mutations, stamped, nil)
}

// CommitOnePhaseGuarded is CommitOnePhase whose predicate cond may decide
// under the row latch, as CheckAndMutateCond's (the owner's index), and
// whose guard, if not nil, runs once the timestamp is taken: an error
// from it applies nothing and is returned (the observer registry's
// version check).
//
// The order is what txn/doc.go, "One-phase commit", argues: the latch,
// the stripe marked as committing, the predicate, the timestamp, the
// guard, the write, the mark lowered, the latch released. A read whose
// timestamp is above the commit's got it after the mark was raised; it
// finds the mark and waits for the latch before it reads.
func (s *Store) CommitOnePhaseGuarded(ctx context.Context, row []byte, cond storage.Cond, predicate storage.Filter, mutations, stamped []storage.Mutation, guard func() error) (uint64, bool, error) {
	if err := s.guard.enter(); err != nil {
		return 0, false, err
	}
	defer s.guard.exit()
	st := s.stamper.Load()
	if st == nil {
		return 0, false, storage.ErrNoOnePhase
	}
	if err := s.space.admit(ctx); err != nil {
		return 0, false, err
	}
	if err := checkOnePhase(ctx, row, predicate, mutations, stamped); err != nil {
		return 0, false, err
	}
	h, err := s.latches.lockRow(ctx, row, true)
	if err != nil {
		return 0, false, err
	}
	defer h.release()
	// Marked before the timestamp is taken, unmarked once the write is
	// applied (visible), still under the latch, before its sync is waited
	// for (hold.release): a reader whose timestamp is later finds the
	// mark and waits for it to drop (latches.awaitCommit), then for the
	// sync (settle).
	stripe := h.stripes[0]
	s.latches.markCommitting(stripe, 1)
	h.before = func() { s.latches.markCommitting(stripe, -1) }
	if err := s.latched(ctx); err != nil {
		return 0, false, err
	}
	matched, err := s.decide(row, cond, predicate)
	if err != nil {
		return 0, false, err
	}
	if matched {
		return 0, true, nil
	}
	ts, err := (*st).Allocate(ctx, 1)
	if err != nil {
		return 0, false, err
	}
	if guard != nil {
		if err := guard(); err != nil {
			return 0, false, err
		}
	}
	all := storage.AppendStamped(append(make([]storage.Mutation, 0, len(mutations)+len(stamped)), mutations...), stamped, ts)
	if err := s.commitLocked(h, []storage.RowMutation{{Row: row, Mutations: all}}, pebble.Sync, nil); err != nil {
		return 0, false, err
	}
	return ts, false, nil
}

// checkOnePhase validates a one-phase commit's arguments: a read's, the
// mutations', and stamped puts only (a timestamp to replace).
func checkOnePhase(ctx context.Context, row []byte, predicate storage.Filter, mutations, stamped []storage.Mutation) error {
	if err := checkCheckAndMutate(ctx, row, predicate, mutations, stamped); err != nil {
		return err
	}
	if len(stamped) == 0 {
		return fmt.Errorf("%w: a one-phase commit with nothing to stamp", storage.ErrInvalidArgument)
	}
	for _, m := range stamped {
		if m.Kind != storage.Put {
			return fmt.Errorf("%w: a one-phase commit stamps puts only, not %v", storage.ErrInvalidArgument, m.Kind)
		}
	}
	return nil
}

var _ storage.OnePhaser = (*Store)(nil)
