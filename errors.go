package percolator

import "github.com/seed-992972ee/percolator/txn"

// Errors, testable with errors.Is.
var (
	// ErrConflict: a write-write conflict aborted the transaction.
	ErrConflict = txn.ErrConflict
	// ErrNotFound: the cell has no value in the snapshot.
	ErrNotFound = txn.ErrNotFound
	// ErrInvalidArgument: bad input; nothing was written.
	ErrInvalidArgument = txn.ErrInvalidArgument
	// ErrTxnFinished: the transaction was already committed or rolled back
	// (errors.Is ErrInvalidArgument too).
	ErrTxnFinished = txn.ErrTxnFinished
	// ErrReadOnly: a write in a read-only transaction (errors.Is
	// ErrInvalidArgument too).
	ErrReadOnly = txn.ErrReadOnly
	// ErrCommitUnknown: the commit's outcome could not be learned.
	ErrCommitUnknown = txn.ErrCommitUnknown
)

// ConflictError carries the cell and reason of a conflict.
type ConflictError = txn.ConflictError
