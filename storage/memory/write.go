package memory

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// Mutate implements storage.Store.
func (s *Store) Mutate(ctx context.Context, row []byte, mutations ...storage.Mutation) error {
	if err := storage.CheckWrite(ctx, row, mutations); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return storage.ErrClosed
	}
	s.applyLocked(row, mutations)
	return nil
}

// CheckAndMutate implements storage.Store.
func (s *Store) CheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.CheckAndMutateCond(ctx, row, nil, predicate, ifTrue, ifFalse, false)
}

// CheckAndMutateCond implements storage.Conditioned. cond runs under the
// store's lock, where the apply hook has seen every write; a memory store
// has no durability to defer.
func (s *Store) CheckAndMutateCond(ctx context.Context, row []byte, cond storage.Cond, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation, _ bool) (bool, error) {
	return s.checkAndMutate(ctx, row, cond, predicate, nil, ifTrue, ifFalse)
}

// CheckAndMutateUnless implements storage.Unlessed.
func (s *Store) CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.checkAndMutate(ctx, row, nil, predicate, unless, ifTrue, ifFalse)
}

// CheckAndMutateCondUnless implements storage.CondUnlessed: cond decides
// the predicate, unless is read under the same lock.
func (s *Store) CheckAndMutateCondUnless(ctx context.Context, row []byte, cond storage.Cond, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation, _ bool) (bool, error) {
	return s.checkAndMutate(ctx, row, cond, predicate, unless, ifTrue, ifFalse)
}

func (s *Store) checkAndMutate(ctx context.Context, row []byte, cond storage.Cond, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := storage.CheckRead(ctx, row, predicate); err != nil {
		return false, err
	}
	if err := storage.ValidateFilter(unless); err != nil {
		return false, err
	}
	if err := storage.ValidateMutations(ifTrue); err != nil {
		return false, err
	}
	if err := storage.ValidateMutations(ifFalse); err != nil {
		return false, err
	}
	groups := groupByFamily(predicate)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false, storage.ErrClosed
	}
	var matched, decided bool
	if cond != nil {
		matched, decided = cond()
	}
	if !decided {
		matched = s.hasCellLocked(string(row), groups)
	}
	if matched && len(unless) > 0 {
		matched = !s.hasCellLocked(string(row), groupByFamily(unless))
	}
	if matched {
		s.applyLocked(row, ifTrue)
	} else {
		s.applyLocked(row, ifFalse)
	}
	return matched, nil
}

// Increment implements storage.Store. The hook sees it as a DeleteCells of
// every version followed by a Put at timestamp 0.
func (s *Store) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if err := storage.CheckWrite(ctx, row, []storage.Mutation{storage.SetCell(family, qualifier, 0, nil)}); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, storage.ErrClosed
	}
	old, err := s.counterLocked(string(row), family, qualifier)
	if err != nil {
		return 0, err
	}
	sum := old + delta
	s.applyLocked(row, []storage.Mutation{
		{Kind: storage.DeleteCells, Family: family, Qualifier: qualifier},
		storage.SetCell(family, qualifier, 0, binary.BigEndian.AppendUint64(nil, uint64(sum))),
	})
	return sum, nil
}

// counterLocked decodes the newest version of a counter column (absent = 0).
func (s *Store) counterLocked(row, family, qualifier string) (int64, error) {
	f := s.mu.families[family]
	if f == nil || f.rows[row] == nil {
		return 0, nil
	}
	r := f.rows[row]
	i, ok := r.find(qualifier)
	if !ok {
		return 0, nil
	}
	v := r.cols[i].versions[0].value
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: increment of a %d-byte value, want 8", storage.ErrInvalidArgument, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// MutateRows implements storage.Batcher. Every row is validated before any
// is changed; all rows are applied under one hold of the lock.
func (s *Store) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	for i := range rows {
		if err := storage.CheckWrite(ctx, rows[i].Row, rows[i].Mutations); err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, storage.ErrClosed
	}
	for i := range rows {
		s.applyLocked(rows[i].Row, rows[i].Mutations)
	}
	return nil, nil
}

// applyLocked applies validated mutations to row in order, then calls the
// hook (when there was something to apply).
func (s *Store) applyLocked(row []byte, mutations []storage.Mutation) {
	if len(mutations) == 0 {
		return
	}
	key := string(row)
	for i := range mutations {
		s.applyOneLocked(key, &mutations[i])
	}
	if s.mu.hook != nil {
		s.mu.hook(row, mutations)
	}
}

func (s *Store) applyOneLocked(row string, m *storage.Mutation) {
	switch m.Kind {
	case storage.Put:
		s.famRowLocked(m.Family, row).put(m.Qualifier, m.TS, m.Value)
	case storage.DeleteCells:
		f := s.mu.families[m.Family]
		if f != nil && f.rows[row] != nil {
			f.rows[row].deleteCells(m.Qualifier, m.Time)
			f.dropIfEmpty(row)
		}
	case storage.DeleteRow:
		for _, f := range s.mu.families {
			if f.rows[row] != nil {
				delete(f.rows, row)
				f.order.remove(row)
			}
		}
	}
}

// famRowLocked returns row's cells in family, creating them if absent.
func (s *Store) famRowLocked(name, row string) *famRow {
	f := s.mu.families[name]
	if f == nil {
		s.mu.nextSeed++
		f = &family{rows: make(map[string]*famRow), order: newSkiplist(s.mu.nextSeed)}
		s.mu.families[name] = f
	}
	r := f.rows[row]
	if r == nil {
		r = &famRow{}
		f.rows[row] = r
		f.order.insert(row, r)
	}
	return r
}

func (f *family) dropIfEmpty(row string) {
	if len(f.rows[row].cols) == 0 {
		delete(f.rows, row)
		f.order.remove(row)
	}
}

// CheckAndMutateDeferred implements storage.Deferred. A memory store has
// no durability to defer: it is CheckAndMutate.
func (s *Store) CheckAndMutateDeferred(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	return s.CheckAndMutate(ctx, row, predicate, ifTrue, ifFalse)
}

// MutateRowsDeferred implements storage.Deferred: it is MutateRows.
func (s *Store) MutateRowsDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return s.MutateRows(ctx, rows)
}
