// Package userstore is the store as the public API hands it to user code
// (percolator.DB.Store): every call passes through, except those that would
// change what the library keeps in it.
//
// # What user code may not do through it
//
//  1. Name a reserved row (storage.ReservedPrefix: the oracle's mark and
//     lease), to read or to write: ErrReserved, as the server's storage
//     RPCs refuse them. A scan's range stops short of them.
//  2. Write a family the library keeps its own cells in (LibraryFamily:
//     the transactions' data, lock, write and notify families, the
//     oracle's, the observers' registry, backfill, quarantine, statistics
//     and partitions, and the lock, queue and graph packages' families):
//     ErrReserved, nothing changed. Reading them is allowed.
//  3. Delete a whole row (storage.DeleteRow), which would delete the
//     library's cells in it too: delete the cells of its own families with
//     DeleteCells instead.
//  4. Close the store: it is the DB's; close the DB.
//
// The server cannot refuse 2 and 3 (the library's client-side packages
// send those calls over RPC like any client); the public API can, because
// those packages do not go through it: they reach the store behind it with
// Raw, which user code cannot call (this package is internal).
//
// Every refusal matches storage.ErrReserved and storage.ErrInvalidArgument.
package userstore

import (
	"context"
	"errors"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// LibraryFamily reports whether the library keeps its own cells in
// family: the one list of them (a test in the root package checks that
// every family the packages declare is listed).
func LibraryFamily(family string) bool {
	switch family {
	case "data", "lock", "write", "notify", "beat", // txn
		"oracle",                                                                                // oracle
		"observers", "observer_backfill", "quarantine", "observer_stats", "observer_partitions", // observer
		"mutex", // lock
		"queue", // queue
		"graph": // graph
		return true
	}
	return false
}

// Key is what Raw needs of the view: a type user code cannot name.
type Key struct{}

// view is the user's view of a store.
type view struct {
	st storage.Store
	// mapErr turns each error into the API's (the root package's
	// sentinels, with the cause kept for errors.Is).
	mapErr func(error) error
}

// unguarded is the method Raw finds.
type unguarded interface{ Unguarded(Key) storage.Store }

// Wrap returns the user's view of st, whose every error passes through
// mapErr (nil: as it is). Wrapping a view returns it.
func Wrap(st storage.Store, mapErr func(error) error) storage.Store {
	if _, ok := st.(unguarded); ok {
		return st
	}
	if mapErr == nil {
		mapErr = func(err error) error { return err }
	}
	v := &view{st: st, mapErr: mapErr}
	if _, ok := st.(storage.Clock); ok {
		return &struct {
			*view
			clockView
		}{v, clockView{v}}
	}
	return v
}

// Raw returns the store behind a user's view, or st itself when it is
// not one: the library's own packages call it on the store they are
// given.
func Raw(st storage.Store) storage.Store {
	if u, ok := st.(unguarded); ok {
		return u.Unguarded(Key{})
	}
	return st
}

// errOf maps a non-nil error.
func (v *view) errOf(err error) error {
	if err == nil {
		return nil
	}
	return v.mapErr(err)
}

// Unguarded implements unguarded.
func (v *view) Unguarded(Key) storage.Store { return v.st }

func checkWrite(row []byte, ms []storage.Mutation) error {
	if err := storage.CheckNotReserved(row); err != nil {
		return err
	}
	for i := range ms {
		m := &ms[i]
		switch {
		case m.Kind == storage.DeleteRow:
			return storage.ReservedError("DeleteRow of %s would delete the library's cells in it too: delete your families' cells with DeleteCells", storage.QuoteRow(row))
		case LibraryFamily(m.Family):
			return storage.ReservedError("family %q holds the library's own cells: write it through the package that owns it", m.Family)
		}
	}
	return nil
}

// ReadRow implements storage.Store.
func (v *view) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := storage.CheckNotReserved(row); err != nil {
		return storage.Row{}, v.errOf(err)
	}
	r, err := v.st.ReadRow(ctx, row, filter)
	return r, v.errOf(err)
}

// Scan implements storage.Store, up to the reserved rows.
func (v *view) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := v.ScanCounted(ctx, start, end, filter, limit, fn)
	return err
}

// ScanCounted implements storage.Counted (counting the rows delivered if
// the store cannot count).
func (v *view) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	if err := storage.CheckScan(start, end, filter, limit); err != nil {
		return 0, v.errOf(err)
	}
	end, ok := storage.UserRange(start, end)
	if !ok {
		return 0, v.errOf(storage.ReservedError("scan from %s starts among the reserved rows", storage.QuoteRow(start)))
	}
	if c, ok := v.st.(storage.Counted); ok {
		n, err := c.ScanCounted(ctx, start, end, filter, limit, fn)
		return n, v.errOf(err)
	}
	var n uint64
	err := v.st.Scan(ctx, start, end, filter, limit, func(r storage.Row) bool { n++; return fn(r) })
	return n, v.errOf(err)
}

// Mutate implements storage.Store.
func (v *view) Mutate(ctx context.Context, row []byte, mutations ...storage.Mutation) error {
	if err := checkWrite(row, mutations); err != nil {
		return v.errOf(err)
	}
	return v.errOf(v.st.Mutate(ctx, row, mutations...))
}

// CheckAndMutate implements storage.Store: the predicate may read any
// family; the branches may not write the library's.
func (v *view) CheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := errors.Join(checkWrite(row, ifTrue), checkWrite(row, ifFalse)); err != nil {
		return false, v.errOf(err)
	}
	matched, err := v.st.CheckAndMutate(ctx, row, predicate, ifTrue, ifFalse)
	return matched, v.errOf(err)
}

// Increment implements storage.Store.
func (v *view) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if err := checkWrite(row, []storage.Mutation{{Kind: storage.Put, Family: family, Qualifier: qualifier}}); err != nil {
		return 0, v.errOf(err)
	}
	sum, err := v.st.Increment(ctx, row, family, qualifier, delta)
	return sum, v.errOf(err)
}

// MutateRows implements storage.Batcher (row by row if the store cannot
// batch). Any refused row refuses the whole call, changing nothing.
func (v *view) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	for i := range rows {
		if err := checkWrite(rows[i].Row, rows[i].Mutations); err != nil {
			return nil, v.errOf(err)
		}
	}
	if b, ok := v.st.(storage.Batcher); ok {
		errs, err := b.MutateRows(ctx, rows)
		for i := range errs {
			errs[i] = v.errOf(errs[i])
		}
		return errs, v.errOf(err)
	}
	errs := make([]error, len(rows))
	failed := false
	for i := range rows {
		errs[i] = v.errOf(v.st.Mutate(ctx, rows[i].Row, rows[i].Mutations...))
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil, nil
	}
	return errs, nil
}

// CompactFamily implements storage.Compacter: it changes no cell, so any
// family may be compacted (nothing to do if the store keeps no deletion
// markers).
func (v *view) CompactFamily(ctx context.Context, family string) error {
	if c, ok := v.st.(storage.Compacter); ok {
		return v.errOf(c.CompactFamily(ctx, family))
	}
	return v.errOf(storage.ValidateFamily(family))
}

// MaxTimestamp implements storage.Limited as the store does.
func (v *view) MaxTimestamp() uint64 { return storage.MaxTimestampOf(v.st) }

// SharedRows implements storage.SharedRows as the store does.
func (v *view) SharedRows() bool {
	sr, ok := v.st.(storage.SharedRows)
	return ok && sr.SharedRows()
}

// Close implements storage.Store by refusing: the store is the DB's.
func (v *view) Close() error {
	return v.errOf(storage.ReservedError("the store belongs to its DB: close the DB instead"))
}

type clockView struct{ v *view }

// Now implements storage.Clock.
func (c clockView) Now(ctx context.Context) (time.Time, error) {
	t, err := c.v.st.(storage.Clock).Now(ctx)
	return t, c.v.errOf(err)
}
