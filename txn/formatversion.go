package txn

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/seed-992972ee/percolator/storage"
)

// FormatVersion is the on-disk format this build reads and writes: the
// layout of the protocol's families and records, the observers', and the
// reserved rows. Version 1 is the layout of every store made before
// stores recorded their format: a store without a record that holds any
// cell is of version 1. Version 2 adds garbage collection: the safe
// point's reserved row, the rows' GC fences (FamilyFence), which every
// prewrite of a version-2 build checks, and lock-only records (OpLock).
// A version-1 build does not check fences, so it must not write to a
// store that is collected: that is what the version bump keeps out.
//
// A store records its version at creation (EnsureFormat). A build opens a
// store of its own version only: a newer store is refused, changing
// nothing (its records may mean what this build cannot read); an older
// one must first be upgraded (Upgrade, `percolator upgrade`), which a
// build of a newer format brings with it. A record of a newer version met
// in a store (DecodeWrite, and locks as readers meet them) fails the read
// with a FormatError; a lock of an unknown format is never rolled back.
const FormatVersion = 2

// ErrFormat: the store, or a record in it, is of a format this build
// does not read. Nothing was changed. errors.As finds a *FormatError with
// both versions.
var ErrFormat = errors.New("txn: unsupported format")

// FormatError says which format was met and which this build reads.
type FormatError struct {
	// What was met: "store" (the store's recorded version) or a record
	// kind ("lock record", "write record").
	What string
	// Found is the version met; Build is FormatVersion (or the record
	// version this build writes).
	Found, Build uint64
	// Detail names the record's unknown operation, if that is what is
	// unknown.
	Detail string
}

func (e *FormatError) Error() string {
	switch {
	case e.What == "store" && e.Found > e.Build:
		return fmt.Sprintf("txn: the store is of format %d, written by a newer percolator; this build reads format %d: use a build of format %d or newer (nothing was changed)", e.Found, e.Build, e.Found)
	case e.What == "store":
		return fmt.Sprintf("txn: the store is of format %d, older than this build's format %d: upgrade it with `percolator upgrade` (nothing was changed)", e.Found, e.Build)
	case e.Detail != "":
		return fmt.Sprintf("txn: a %s with %s, written by a newer percolator (format %d records are known here): use a newer build; the record was left as it is", e.What, e.Detail, e.Build)
	}
	return fmt.Sprintf("txn: a %s of version %d, written by a newer percolator (this build knows version %d): use a newer build; the record was left as it is", e.What, e.Found, e.Build)
}

// Is makes errors.Is(err, ErrFormat) true.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// The store's format record: one cell of a reserved row, owned here.
var formatRow = storage.ReservedRow("format")

const (
	familyFormat = "format"
	formatQual   = "version"
)

var formatCell = storage.Filter{{Family: familyFormat, Qualifier: formatQual, Limit: 1}}

// ReadFormat returns the format version the store records, and whether it
// records one (a store made before formats were recorded does not: it is
// of version 1 if it holds anything, and new if it is empty).
func ReadFormat(ctx context.Context, st storage.Store) (version uint64, recorded bool, err error) {
	r, err := st.ReadRow(ctx, formatRow, formatCell)
	if err != nil {
		return 0, false, fmt.Errorf("txn: reading the store's format: %w", err)
	}
	if len(r.Cells) == 0 {
		return 1, false, nil
	}
	v, err := strconv.ParseUint(string(r.Cells[0].Value), 10, 64)
	if err != nil || v == 0 {
		return 0, true, fmt.Errorf("txn: the store's format record holds %q: %w", r.Cells[0].Value, errCorrupt)
	}
	return v, true, nil
}

// EnsureFormat checks that the store is of FormatVersion, recording it
// in a new store (one that holds no cell of the protocol's families), and
// returns it. A store
// of another version fails with a *FormatError and is not changed: a store
// made before formats were recorded, which holds cells and no record, is
// of version 1.
func EnsureFormat(ctx context.Context, st storage.Store) (uint64, error) {
	v, recorded, err := ReadFormat(ctx, st)
	if err != nil {
		return 0, err
	}
	if !recorded {
		empty, err := storeEmpty(ctx, st)
		if err != nil {
			return 0, err
		}
		if empty {
			// Written only where no version is: two processes creating
			// the store at once write the same value, and a late copy of
			// this call never overwrites a version an upgrade wrote.
			if _, err := st.CheckAndMutate(ctx, formatRow, formatCell, nil,
				[]storage.Mutation{formatMutation(FormatVersion)}); err != nil {
				return 0, fmt.Errorf("txn: recording the store's format: %w", err)
			}
			if v, _, err = ReadFormat(ctx, st); err != nil {
				return 0, err
			}
		}
	}
	if v != FormatVersion {
		return v, &FormatError{What: "store", Found: v, Build: FormatVersion}
	}
	return v, nil
}

// storeEmpty reports whether st holds no cell of the protocol's families:
// what garbage collection and its fences are about. (The lock, queue and
// graph packages' cells are the same in every format.)
func storeEmpty(ctx context.Context, st storage.Store) (bool, error) {
	var f storage.Filter
	for _, fam := range []string{FamilyData, FamilyLock, FamilyWrite, FamilyNotify, FamilyBeat} {
		f = append(f, storage.Selector{Family: fam, AllQualifiers: true, Limit: 1})
	}
	empty := true
	err := st.Scan(ctx, nil, nil, f, 1, func(storage.Row) bool { empty = false; return false })
	if err != nil {
		return false, fmt.Errorf("txn: reading whether the store is new: %w", err)
	}
	return empty, nil
}

func formatMutation(version uint64) storage.Mutation {
	return storage.SetCell(familyFormat, formatQual, 1, []byte(strconv.FormatUint(version, 10)))
}

// Upgrade moves the store to FormatVersion and returns the version it was
// of. Version 1 becomes 2 by recording it: version 2 only adds what
// version 1 stores have none of (the safe point's row, fences, lock-only
// records). A store of this version already is left as it is; a newer
// one is refused with a *FormatError. The caller must hold the store:
// no process of the old format may run on it (an embedded store's
// directory lock, a stopped server; on a shared store, no registered
// session: see the cluster's upgrade), since such a process would write
// without checking fences.
func Upgrade(ctx context.Context, st storage.Store) (from uint64, err error) {
	v, recorded, err := ReadFormat(ctx, st)
	if err != nil {
		return 0, err
	}
	switch {
	case v == FormatVersion:
		return v, nil
	case v > FormatVersion:
		return v, &FormatError{What: "store", Found: v, Build: FormatVersion}
	case !recorded:
		empty, err := storeEmpty(ctx, st)
		if err != nil {
			return 0, err
		}
		if empty {
			return FormatVersion, nil // a new store: Open records it
		}
	}
	if err := RecordFormat(ctx, st, FormatVersion); err != nil {
		return v, err
	}
	return v, nil
}

// RecordFormat records version as the store's format, whatever it
// recorded before: the last step of an upgrade, once every record is of
// the new version (tests make stores of other versions with it).
func RecordFormat(ctx context.Context, st storage.Store, version uint64) error {
	if version == 0 {
		return fmt.Errorf("%w: format version 0", ErrInvalidArgument)
	}
	// Blind, and not safe to reorder with another RecordFormat: only an
	// upgrade holding the store (no other process on it) calls it.
	if err := st.Mutate(ctx, formatRow, formatMutation(version)); err != nil {
		return fmt.Errorf("txn: recording the store's format: %w", err)
	}
	return nil
}
