package pebble

import (
	"bytes"
	"context"
	"fmt"
	"slices"

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
	matched, err := s.predicates(checks)
	if err != nil {
		return nil, 0, err
	}
	write := false
	for i := range checks {
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

// predicates reads each check's predicate (and its unless where it
// matched): matched[i] is checks[i]'s branch. The caller holds every
// row's latch. One check reads as CheckAndMutate does; more read through
// one iterator, made now (after every write the latches wait for), a
// family at a time and in each the rows in key order, so that the tables
// it opened for one row serve the next (keys are family first: a row's
// families are far apart).
func (s *Store) predicates(checks []storage.RowCheck) ([]bool, error) {
	matched := make([]bool, len(checks))
	if len(checks) == 1 {
		var err error
		matched[0], err = s.matches(checks[0].Row, nil, checks[0].Predicate, checks[0].Unless)
		return matched, err
	}
	it, err := s.newPointIter()
	if err != nil {
		return nil, fmt.Errorf("pebble: read predicates: %w", err)
	}
	order := make([]int, len(checks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(checks[a].Row, checks[b].Row) })
	preds, unless := make([][]group, len(checks)), make([][]group, len(checks))
	for i := range checks {
		preds[i] = groupByFamily(s.prune(checks[i].Row, checks[i].Predicate))
		unless[i] = groupByFamily(checks[i].Unless)
	}
	// The predicates: a check matches once a family selects a cell.
	err = selectsAny(it, checks, order, preds, func(i int) bool { return !matched[i] }, func(i int) { matched[i] = true })
	if err == nil {
		// The unless of each check that matched: it unmatches once a
		// family selects a cell.
		err = selectsAny(it, checks, order, unless, func(i int) bool { return matched[i] }, func(i int) { matched[i] = false })
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pebble: read predicates: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return matched, nil
}

// selectsAny reads, through it, a family at a time (in family order) and
// in each the checks in order, the group of each check i in that family
// while want(i), and calls found(i) when it selects a cell.
func selectsAny(it *pebble.Iterator, checks []storage.RowCheck, order []int, groups [][]group, want func(int) bool, found func(int)) error {
	var families []string
	for i := range groups {
		for _, g := range groups[i] {
			families = append(families, g.family)
		}
	}
	slices.Sort(families)
	for _, family := range slices.Compact(families) {
		for _, i := range order {
			if !want(i) {
				continue
			}
			k := slices.IndexFunc(groups[i], func(g group) bool { return g.family == family })
			if k < 0 {
				continue
			}
			cells, err := readGroupsIn(it, checks[i].Row, groups[i][k:k+1], true)
			if err != nil {
				return err
			}
			if len(cells) > 0 {
				found(i)
			}
		}
	}
	return nil
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
