package percolator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// Errors, testable with errors.Is. Every error the API returns says
// "percolator: ..." and matches these; it also unwraps to the internal
// package's error it came from, for logs and debugging.
// Limits on rows and columns, the same on every backend: a row is at most
// MaxRowSize bytes (the store's key limit less the room notifications kept
// in their own rows need), a column at most MaxColumnSize.
const (
	MaxRowSize    = txn.MaxRowSize
	MaxColumnSize = txn.MaxColumnSize
)

var (
	// ErrConflict: a write-write conflict aborted the transaction (or
	// another client that found its owner dead rolled it back); nothing of
	// it is visible. Retrying the whole transaction may succeed; Update
	// does. errors.As finds a *ConflictError with the cell and the reason.
	ErrConflict = errors.New("percolator: write conflict")
	// ErrNotFound: the cell has no value in the snapshot.
	ErrNotFound = errors.New("percolator: not found")
	// ErrInvalidArgument: bad input (an empty or oversized row, a reserved
	// or malformed column, a value over MaxValueSize, bad options); nothing
	// was written.
	ErrInvalidArgument = errors.New("percolator: invalid argument")
	// ErrTxnFinished: the transaction was already committed or rolled back
	// (errors.Is ErrInvalidArgument too).
	ErrTxnFinished = fmt.Errorf("%w: transaction already finished", ErrInvalidArgument)
	// ErrReadOnly: a write in a read-only transaction (errors.Is
	// ErrInvalidArgument too).
	ErrReadOnly = fmt.Errorf("%w: write in a read-only transaction", ErrInvalidArgument)
	// ErrTxnTooLarge: a Set or Delete past the transaction's limits
	// (Options.MaxTxnWrites, MaxTxnBytes); the write was not buffered and
	// the transaction holds what it held (errors.Is ErrInvalidArgument
	// too). Split the work into smaller transactions.
	ErrTxnTooLarge = fmt.Errorf("%w: transaction too large", ErrInvalidArgument)
	// ErrManaged: Commit or Rollback called by an observer on the
	// transaction it runs in, which the framework ends (return nil to
	// commit, an error to roll back). errors.Is ErrInvalidArgument too.
	ErrManaged = fmt.Errorf("%w: the observer framework ends this transaction", ErrInvalidArgument)
	// ErrCommitUnknown: the commit's outcome could not be learned. The
	// transaction is either committed or will be rolled back; never assume
	// either.
	ErrCommitUnknown = errors.New("percolator: commit outcome unknown")
	// ErrInUse: the store is held by another DB or process (an embedded
	// store's directory, an exclusive store's one client), or its oracle
	// lease by another DB without a shared Options.Oracle. A DB whose
	// oracle lost its lease (not renewed in time, or taken over) returns
	// it from every Begin: close it and open it again.
	ErrInUse = errors.New("percolator: in use")
	// ErrNoStore: Options.MustExist, and Dir holds no store.
	ErrNoStore = errors.New("percolator: no store")
	// ErrClosed: the DB (or its store) is closed.
	ErrClosed = errors.New("percolator: closed")
	// ErrStoreFailed: the store could not make a write durable (a failed
	// log sync) and refuses every call rather than return what a crash
	// could take back; close the DB and open it again. A write that
	// returned it may or may not have been applied (its record may have
	// reached the disk before the failure): treat its outcome as unknown.
	// A Commit reports such a write as ErrCommitUnknown.
	ErrStoreFailed = errors.New("percolator: store failed")
	// ErrUnavailable: the server (Options.Server), Bigtable or etcd could
	// not be reached, or kept failing until the retry budget ran out.
	ErrUnavailable = errors.New("percolator: server unavailable")
	// ErrUnauthenticated: the server refused the token (Options.Token).
	ErrUnauthenticated = errors.New("percolator: unauthenticated")
	// ErrSessionLost: a commit was abandoned before its commit point because
	// this process could not prove its liveness session with the server is
	// live. Nothing of it is visible; it is a conflict too (errors.Is
	// ErrConflict), so Update retries it.
	ErrSessionLost = fmt.Errorf("%w: liveness session lost", ErrConflict)
	// ErrFormat: the store, or a record in it, is of an on-disk format
	// this build does not read (FormatVersion): a store written by a newer
	// percolator, or an older one not yet upgraded. Nothing was changed;
	// a lock of an unknown format is never rolled back.
	ErrFormat = errors.New("percolator: unsupported store format")
	// ErrSnapshotTooOld: the transaction's start_ts is below the garbage
	// collector's safe point, under which versions may be gone; the read
	// returned nothing. Begin a new transaction.
	ErrSnapshotTooOld = errors.New("percolator: snapshot too old")
	// ErrNoSpace: the store's disk is nearly full (Options.DiskReserve);
	// nothing was written. The garbage collector still runs and frees
	// space; writes are accepted again once enough is free.
	ErrNoSpace = errors.New("percolator: disk nearly full")
)

// FormatVersion is the on-disk format this build reads and writes; a
// store records its own at creation (DB.FormatVersion).
const FormatVersion = txn.FormatVersion

// kinds maps the internal packages' errors to the API's, most specific
// first.
var kinds = []struct {
	internal error
	api      []error
}{
	{txn.ErrTxnFinished, []error{ErrTxnFinished, ErrInvalidArgument}},
	{txn.ErrReadOnly, []error{ErrReadOnly, ErrInvalidArgument}},
	{txn.ErrTxnTooLarge, []error{ErrTxnTooLarge, ErrInvalidArgument}},
	{txn.ErrManaged, []error{ErrManaged, ErrInvalidArgument}},
	{txn.ErrInvalidArgument, []error{ErrInvalidArgument}},
	{storage.ErrInvalidArgument, []error{ErrInvalidArgument}},
	{oracle.ErrInvalidArgument, []error{ErrInvalidArgument}},
	{txn.ErrSessionLost, []error{ErrSessionLost, ErrConflict}},
	{txn.ErrConflict, []error{ErrConflict}},
	{txn.ErrNotFound, []error{ErrNotFound}},
	{txn.ErrCommitUnknown, []error{ErrCommitUnknown}},
	{storage.ErrInUse, []error{ErrInUse}},
	{storage.ErrClosed, []error{ErrClosed}},
	{oracle.ErrClosed, []error{ErrClosed}},
	{storage.ErrFailed, []error{ErrStoreFailed}},
	{oracle.ErrLeaseLost, []error{ErrInUse}},
	{pebble.ErrNotExist, []error{ErrNoStore}},
	{rpc.ErrUnavailable, []error{ErrUnavailable}},
	{storage.ErrUnavailable, []error{ErrUnavailable}},
	{rpc.ErrOutcomeUnknown, []error{ErrCommitUnknown}},
	{rpc.ErrUnauthenticated, []error{ErrUnauthenticated}},
	{txn.ErrFormat, []error{ErrFormat}},
	{txn.ErrSnapshotTooOld, []error{ErrSnapshotTooOld}},
	{storage.ErrNoSpace, []error{ErrNoSpace}},
}

// apiError is an error as the API returns it: "percolator: " and the
// cause's message without its internal package prefixes; errors.Is
// matches the API sentinels of its kind and, through Unwrap, the cause.
type apiError struct {
	kinds []error
	msg   string // replaces the cause's message when set
	cause error
}

func (e *apiError) Error() string {
	if e.msg != "" {
		return "percolator: " + e.msg
	}
	return "percolator: " + trimPackages(e.cause.Error())
}

func (e *apiError) Unwrap() error { return e.cause }

func (e *apiError) Is(target error) bool {
	for _, k := range e.kinds {
		if target == k {
			return true
		}
	}
	return false
}

// As finds a *ConflictError.
func (e *apiError) As(target any) bool {
	p, ok := target.(**ConflictError)
	var ce *txn.ConflictError
	if !ok || !errors.As(e.cause, &ce) {
		return false
	}
	*p = &ConflictError{Row: ce.Row, Column: ce.Column, StartTS: ce.StartTS, Reason: ce.Reason}
	return true
}

// apiErr turns an internal error into the API's (nil stays nil; an API
// error stays as it is).
func apiErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*apiError); ok {
		return err
	}
	e := &apiError{cause: err}
	for _, k := range kinds {
		if errors.Is(err, k.internal) {
			e.kinds = append(e.kinds, k.api...)
		}
	}
	return e
}

// apiErrMsg is apiErr with a message of its own.
func apiErrMsg(err error, format string, args ...any) error {
	e := apiErr(err).(*apiError)
	e.msg = fmt.Sprintf(format, args...)
	return e
}

// trimPackages drops the leading "pkg: " prefixes of the internal
// packages from a message.
func trimPackages(msg string) string {
	for {
		trimmed := false
		for _, p := range []string{"percolator: ", "txn: ", "storage: ", "observer: ", "oracle: ", "pebble: ", "memory: ", "coord: ", "rpc: ", "remote: "} {
			if strings.HasPrefix(msg, p) {
				msg, trimmed = msg[len(p):], true
			}
		}
		if !trimmed {
			return msg
		}
	}
}

// ConflictError carries the cell and the reason of a conflict. It matches
// ErrConflict with errors.Is; find it with errors.As.
type ConflictError struct {
	Row     []byte
	Column  string
	StartTS uint64 // the aborted transaction's
	Reason  string // what the prewrite found: a lock, a newer write, a rollback
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("percolator: write conflict on %q/%s at start_ts %d: %s", e.Row, e.Column, e.StartTS, e.Reason)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
