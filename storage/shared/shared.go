// Package shared presents a store as one of several processes sees a
// store they share (a server's, Bigtable's): every call passes through,
// and so do the capabilities a shared store can have, but not those of a
// store one process owns.
//
// It is not test code: the bench command counts the calls of a store seen
// so, and the conformance suite (storage/storagetest.SharedStore) and the
// tests run several clients on one store as separate processes would.
package shared

import (
	"context"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// Store is a store as one of several processes sees a store they share:
// every call passes through, and so do the capabilities a shared store
// can have (Batcher, Counted, SharedRows), but not those of a store one
// process owns (Exclusive, ApplyHooker, Conditioned: no in-memory index;
// Deferred: no unsynced writes a crash of the store could lose under a
// live client). Its methods are safe for concurrent use as the wrapped
// store's are.
type Store struct{ storage.Store }

var (
	_ storage.Batcher    = Store{}
	_ storage.Counted    = Store{}
	_ storage.SharedRows = Store{}
	_ storage.Unlessed   = Store{}
)

// CheckAndMutateUnless implements storage.Unlessed as the wrapped store
// does (every backend is Unlessed; one that is not fails the call, with
// ErrInvalidArgument, changing nothing).
func (s Store) CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	u, ok := s.Store.(storage.Unlessed)
	if !ok {
		return false, fmt.Errorf("%w: the store is not Unlessed", storage.ErrInvalidArgument)
	}
	return u.CheckAndMutateUnless(ctx, row, predicate, unless, ifTrue, ifFalse)
}

// MutateRows implements storage.Batcher, row by row if the store cannot
// batch.
func (s Store) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	if b, ok := s.Store.(storage.Batcher); ok {
		return b.MutateRows(ctx, rows)
	}
	errs := make([]error, len(rows))
	failed := false
	for i := range rows {
		errs[i] = s.Store.Mutate(ctx, rows[i].Row, rows[i].Mutations...)
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil, nil
	}
	return errs, nil
}

// ScanCounted implements storage.Counted, counting the rows delivered if
// the store cannot count what it visits.
func (s Store) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	if c, ok := s.Store.(storage.Counted); ok {
		return c.ScanCounted(ctx, start, end, filter, limit, fn)
	}
	var n uint64
	err := s.Store.Scan(ctx, start, end, filter, limit, func(r storage.Row) bool { n++; return fn(r) })
	return n, err
}

// SharedRows implements storage.SharedRows as the wrapped store does: a
// store whose families share rows still does under another view (the
// layout of notifications depends on it).
func (s Store) SharedRows() bool {
	sr, ok := s.Store.(storage.SharedRows)
	return ok && sr.SharedRows()
}
