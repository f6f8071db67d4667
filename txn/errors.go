package txn

import (
	"errors"
	"fmt"
)

// Sentinel errors of the protocol. Test with errors.Is.
var (
	// ErrConflict: the transaction was aborted by a write-write conflict
	// (or rolled back by another client that found it dead); nothing of it
	// is visible. Retrying the whole transaction may succeed.
	ErrConflict = errors.New("txn: write conflict")
	// ErrNotFound: the cell has no value in the snapshot.
	ErrNotFound = errors.New("txn: not found")
	// ErrInvalidArgument: bad input; nothing was written.
	ErrInvalidArgument = errors.New("txn: invalid argument")
	// ErrTxnFinished: the transaction was already committed or rolled back.
	ErrTxnFinished = fmt.Errorf("%w: transaction already finished", ErrInvalidArgument)
	// ErrReadOnly: a write in a read-only transaction.
	ErrReadOnly = fmt.Errorf("%w: write in a read-only transaction", ErrInvalidArgument)
	// ErrTxnTooLarge: a write past the transaction's limits
	// (Options.MaxTxnWrites, MaxTxnBytes); it was not buffered, and the
	// transaction holds what it held before.
	ErrTxnTooLarge = fmt.Errorf("%w: transaction too large", ErrInvalidArgument)
	// ErrManaged: Commit or Rollback of a transaction its framework ends
	// (an observer's run): return nil from the observer to commit it, an
	// error to roll it back.
	ErrManaged = fmt.Errorf("%w: the observer framework commits this transaction (return nil to commit it, an error to roll it back)", ErrInvalidArgument)
	// ErrCommitUnknown: the commit's outcome could not be learned (the
	// primary's commit call failed and its status could not be read). The
	// transaction is either committed or will be rolled back; never assume
	// either.
	ErrCommitUnknown = errors.New("txn: commit outcome unknown")
	// ErrSessionLost: the commit was abandoned before its commit point
	// because this process could not prove it is alive (its liveness
	// session lapsed: Options.Session). Nothing of it is visible. It is a
	// conflict: retrying may succeed once the session is back.
	ErrSessionLost = fmt.Errorf("%w: this process's liveness session is lost (it cannot prove it is alive), so it does not commit", ErrConflict)
)

// ConflictError carries the cell and the reason of a conflict. It matches
// ErrConflict with errors.Is.
type ConflictError struct {
	Row     []byte
	Column  string
	StartTS uint64
	Reason  string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("txn: write conflict on %q/%s at start_ts %d: %s", e.Row, e.Column, e.StartTS, e.Reason)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// errLocked is returned by one step of a read that found a live lock; the
// driver backs off and tries again.
var errLocked = errors.New("txn: cell locked by a live transaction")

// errCrashed stops a commit at a crash point (tests only).
var errCrashed = errors.New("txn: crashed at a test crash point")
