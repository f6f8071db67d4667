package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// Mutate implements storage.Store.
func (s *Store) Mutate(ctx context.Context, row []byte, mutations ...storage.Mutation) error {
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return err
	}
	if err := storage.CheckWrite(ctx, row, mutations); err != nil || len(mutations) == 0 {
		return err
	}
	h, err := s.latches.lockRow(ctx, row, true)
	if err != nil {
		return err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return err
	}
	return s.commitLocked(h, []storage.RowMutation{{Row: row, Mutations: mutations}}, pebble.Sync, nil)
}

// CheckAndMutate implements storage.Store: under the row latch, read the
// predicate (stopping at the first selected cell), then commit the branch.
func (s *Store) CheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, nil, predicate, nil, ifTrue, ifFalse, pebble.Sync, nil)
}

// CheckAndMutateUnless implements storage.Unlessed: under the row latch,
// read the predicate, then unless, then commit the branch.
func (s *Store) CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, nil, predicate, unless, ifTrue, ifFalse, pebble.Sync, nil)
}

// CheckAndMutateCondUnless implements storage.CondUnlessed: cond decides
// the predicate under the row latch, and unless is read from the store
// under the same latch (the hook's owner indexes no such cells).
func (s *Store) CheckAndMutateCondUnless(ctx context.Context, row []byte, cond storage.Cond, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	sync := pebble.Sync
	if deferred {
		sync = pebble.NoSync
	}
	return s.checkAndMutate(ctx, row, cond, predicate, unless, ifTrue, ifFalse, sync, nil)
}

// CheckAndMutateDeferred implements storage.Deferred: CheckAndMutate
// without waiting for the WAL sync. Pebble's WAL is one ordered log whose
// every sync (and every rotation, which syncs the old segment) covers all
// records before it, so the next synced write makes this one durable.
func (s *Store) CheckAndMutateDeferred(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, nil, predicate, nil, ifTrue, ifFalse, pebble.NoSync, nil)
}

// CheckAndMutateCond implements storage.Conditioned: cond runs under the
// row latch, where the apply hook has seen every write of the row.
func (s *Store) CheckAndMutateCond(ctx context.Context, row []byte, cond storage.Cond, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	sync := pebble.Sync
	if deferred {
		sync = pebble.NoSync
	}
	return s.checkAndMutate(ctx, row, cond, predicate, nil, ifTrue, ifFalse, sync, nil)
}

func (s *Store) checkAndMutate(ctx context.Context, row []byte, cond storage.Cond, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation, sync *pebble.WriteOptions, rec func(matched bool) []Record) (bool, error) {
	if err := s.guard.enter(); err != nil {
		return false, err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return false, err
	}
	if err := checkCheckAndMutate(ctx, row, predicate, ifTrue, ifFalse); err != nil {
		return false, err
	}
	if err := storage.ValidateFilter(unless); err != nil {
		return false, err
	}
	h, err := s.latches.lockRow(ctx, row, sync == pebble.Sync)
	if err != nil {
		return false, err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return false, err
	}
	matched, err := s.matches(row, cond, predicate, unless)
	if err != nil {
		return false, err
	}
	branch := ifFalse
	if matched {
		branch = ifTrue
	}
	var recs []Record
	if rec != nil {
		recs = rec(matched)
	}
	if len(branch) == 0 && len(recs) == 0 {
		return matched, nil
	}
	return matched, s.commitLocked(h, []storage.RowMutation{{Row: row, Mutations: branch}}, sync, recs)
}

// decide reports whether predicate selects a cell of row: as cond says,
// where it decides, or as read. The caller holds the row's latch.
func (s *Store) decide(row []byte, cond storage.Cond, predicate storage.Filter) (bool, error) {
	if cond != nil {
		if matched, decided := cond(); decided {
			return matched, nil
		}
	}
	cells, err := s.readRow(row, s.prune(row, predicate), true)
	return len(cells) > 0, err
}

// matches reports whether a check of row takes its true branch: its
// predicate selects a cell (as decide says) and its unless none. The
// caller holds the row's latch.
func (s *Store) matches(row []byte, cond storage.Cond, predicate, unless storage.Filter) (bool, error) {
	matched, err := s.decide(row, cond, predicate)
	if err != nil || !matched || len(unless) == 0 {
		return matched, err
	}
	return s.selectsNone(row, unless)
}

// selectsNone reports whether filter selects no cell of row. The caller
// holds the row's latch.
func (s *Store) selectsNone(row []byte, filter storage.Filter) (bool, error) {
	cells, err := s.readRow(row, filter, true)
	return len(cells) == 0, err
}

func checkCheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) error {
	if err := storage.CheckRead(ctx, row, predicate); err != nil {
		return err
	}
	return errors.Join(storage.ValidateMutations(ifTrue), storage.ValidateMutations(ifFalse))
}

// Increment implements storage.Store. The apply hook sees it as a
// DeleteCells of every version followed by a Put at timestamp 0.
func (s *Store) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	return s.increment(ctx, row, family, qualifier, delta, nil)
}

func (s *Store) increment(ctx context.Context, row []byte, family, qualifier string, delta int64, rec func(sum int64) []Record) (int64, error) {
	if err := s.guard.enter(); err != nil {
		return 0, err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return 0, err
	}
	if err := storage.CheckWrite(ctx, row, []storage.Mutation{storage.SetCell(family, qualifier, 0, nil)}); err != nil {
		return 0, err
	}
	h, err := s.latches.lockRow(ctx, row, true)
	if err != nil {
		return 0, err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return 0, err
	}
	old, err := s.counter(row, family, qualifier)
	if err != nil {
		return 0, err
	}
	sum := old + delta
	ms := []storage.Mutation{
		{Kind: storage.DeleteCells, Family: family, Qualifier: qualifier},
		storage.SetCell(family, qualifier, 0, binary.BigEndian.AppendUint64(nil, uint64(sum))),
	}
	var recs []Record
	if rec != nil {
		recs = rec(sum)
	}
	return sum, s.commitLocked(h, []storage.RowMutation{{Row: row, Mutations: ms}}, pebble.Sync, recs)
}

// counter decodes the newest version of a counter column (absent = 0).
func (s *Store) counter(row []byte, family, qualifier string) (int64, error) {
	cells, err := s.readRow(row, storage.Filter{{Family: family, Qualifier: qualifier, Limit: 1}}, true)
	if err != nil || len(cells) == 0 {
		return 0, err
	}
	if v := cells[0].Value; len(v) != 8 {
		return 0, fmt.Errorf("%w: increment of a %d-byte value, want 8", storage.ErrInvalidArgument, len(v))
	}
	return int64(binary.BigEndian.Uint64(cells[0].Value)), nil
}

// MutateRows implements storage.Batcher: every row is validated, all rows
// are latched (in stripe order), and one pebble batch commits them all.
func (s *Store) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return s.mutateRows(ctx, rows, pebble.Sync, nil)
}

// MutateRowsDeferred implements storage.Deferred: MutateRows without
// waiting for the WAL sync (see CheckAndMutateDeferred).
func (s *Store) MutateRowsDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return s.mutateRows(ctx, rows, pebble.NoSync, nil)
}

func (s *Store) mutateRows(ctx context.Context, rows []storage.RowMutation, sync *pebble.WriteOptions, recs []Record) ([]error, error) {
	if err := s.guard.enter(); err != nil {
		return nil, err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return nil, err
	}
	for i := range rows {
		if err := storage.CheckWrite(ctx, rows[i].Row, rows[i].Mutations); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	if len(rows) == 0 && len(recs) == 0 {
		return nil, nil
	}
	h, err := s.latches.lockRows(ctx, rows, sync == pebble.Sync)
	if err != nil {
		return nil, err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return nil, err
	}
	return nil, s.commitLocked(h, rows, sync, recs)
}

// commitLocked applies rows and recs in one batch, commits it, registers
// new families and calls the hook, row by row, then releases h (every
// row's latch, which the caller holds) and, for a durable commit, waits
// for its log sync (commitBatch).
func (s *Store) commitLocked(h *hold, rows []storage.RowMutation, sync *pebble.WriteOptions, recs []Record) error {
	b := s.newBatch(rows)
	defer b.Close()
	var w batchWriter
	w.init(s, b)
	for i := range rows {
		if err := w.add(rows[i].Row, rows[i].Mutations); err != nil {
			return fmt.Errorf("pebble: write %q: %w", rows[i].Row, err)
		}
	}
	if err := addRecords(b, recs); err != nil {
		return err
	}
	// An empty batch (deletes of absent cells) has nothing to make durable,
	// but the hook still sees what the caller applied.
	if b.Empty() {
		s.applied(rows, &w)
		return nil
	}
	return s.commitBatch(h, b, rows, sync, func() { s.applied(rows, &w) })
}

// applied registers the new families a committed batch wrote and calls
// the hook with its rows' mutations. The caller holds every row's latch.
func (s *Store) applied(rows []storage.RowMutation, w *batchWriter) {
	for _, f := range w.newFamilies {
		s.families.add(f)
	}
	for i := range rows {
		if len(rows[i].Mutations) > 0 {
			s.callHook(rows[i].Row, rows[i].Mutations)
		}
	}
}

// latched is the check a write makes once it holds its latches: the
// caller's context, and the store's failure. A write that queued on a latch
// behind a commit whose sync failed must not go on into pebble, whose log
// is broken for good: it would report success for a deferred write that
// can never be made durable, or crash the process on the next log
// rotation.
func (s *Store) latched(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.guard.failure()
}

// commitBatch commits b, whose rows' latches h holds, and runs applied
// once b is applied (still under the latches). A deferred
// commit returns then, releasing nothing (the caller does). A durable one
// records itself as its rows' sync in flight (latches.beginSync), so a
// reader that sees it waits for the sync (settle); is applied without
// waiting for its log sync (pebble's ApplyNoSyncWait); releases h; and
// then waits for the sync, which it cannot abandon (its batch is
// published; its outcome must not be guessed). A failed commit or sync
// fails the store before the sync is marked done, so such a reader
// returns the failure, never the write.
func (s *Store) commitBatch(h *hold, b *pebble.Batch, rows []storage.RowMutation, sync *pebble.WriteOptions, applied func()) error {
	if err := s.guard.failure(); err != nil {
		return err // failed since the latches were taken
	}
	if sync != pebble.Sync {
		if err := commitRecovering(b, sync); err != nil {
			s.guard.fail(err)
			return s.guard.failure()
		}
		applied()
		return nil
	}
	p := s.latches.beginSync(rows)
	s.group.committed()
	if err := applyNoSyncWait(s.db, b); err != nil {
		s.guard.fail(err)
		s.latches.endSync(p, rows)
		return s.guard.failure()
	}
	applied()
	h.release()
	return s.awaitSync(b, p, rows)
}

// awaitSync waits for b's log sync, records its outcome (failing the store
// if it failed) and marks p done. The caller closes b after it.
func (s *Store) awaitSync(b *pebble.Batch, p *inflightSync, rows []storage.RowMutation) error {
	err := b.SyncWait()
	if err != nil {
		s.guard.fail(err)
	}
	s.latches.endSync(p, rows)
	if err != nil {
		return s.guard.failure()
	}
	s.synced.Add(1)
	return nil
}

// SyncedWrites returns how many of its callers' writes the store has made
// durable since it opened, each waiting for a WAL sync (which pebble
// shares among writes committed together); WriteRecords' are not
// counted. For measuring what an operation costs.
func (s *Store) SyncedWrites() uint64 { return s.synced.Load() }

// commitRecovering commits b, turning pebble's fatal commit error (a
// failed WAL write or sync, reported through Logger.Fatalf on this
// goroutine) into an error. Any other panic goes on.
func commitRecovering(b *pebble.Batch, sync *pebble.WriteOptions) (err error) {
	defer recoverFatal(&err)
	return b.Commit(sync)
}

// applyNoSyncWait applies b durably without waiting for its log sync
// (the caller calls b.SyncWait, which returns a failed sync's error),
// turning pebble's fatal commit error (a failed WAL write) into an error
// as commitRecovering does.
func applyNoSyncWait(db *pebble.DB, b *pebble.Batch) (err error) {
	defer recoverFatal(&err)
	return db.ApplyNoSyncWait(b, pebble.Sync)
}

// recoverFatal turns a fatalPanic (options.go) into *err; any other panic
// goes on.
func recoverFatal(err *error) {
	if p := recover(); p != nil {
		fp, ok := p.(fatalPanic)
		if !ok {
			panic(p)
		}
		*err = errors.New(fp.msg)
	}
}

// newBatch returns an indexed batch when a mutation must read the row
// through the writes queued before it (a range or row delete that is not
// the batch's first mutation); otherwise a plain one.
func (s *Store) newBatch(rows []storage.RowMutation) *pebble.Batch {
	first := true
	for i := range rows {
		for j := range rows[i].Mutations {
			if !first && readsRow(&rows[i].Mutations[j]) {
				return s.db.NewIndexedBatch()
			}
			first = false
		}
	}
	return s.db.NewBatch()
}

// readsRow reports whether a mutation must find the versions it deletes.
func readsRow(m *storage.Mutation) bool {
	return m.Kind == storage.DeleteRow || (m.Kind == storage.DeleteCells && !exactRange(m.Time))
}

func exactRange(tr storage.TimeRange) bool {
	return tr.End != 0 && tr.End == tr.Start+1
}
