// Package percolator is a Go implementation of Google's Percolator:
// cross-row snapshot-isolation transactions over a Bigtable-model store
// whose only atomic primitive is a single-row conditional mutation, and
// observers — code that runs, in its own transaction, when a column
// changes (incremental processing).
//
// # Opening a database
//
//	db, err := percolator.Open(ctx, percolator.Options{Dir: dir}) // Dir "" = in-memory
//	defer db.Close()
//
// The embedded deployment (the default) keeps the store in Pebble under
// Dir/store, with the timestamp oracle's high-water mark and lease inside
// it. One DB opens a store at a time: a second Open of the directory, in
// this process or another, fails with ErrInUse naming the holder. The next
// DB to open it resolves the locks a crashed one left at once. Options.Store
// runs on another storage.Store; DBs that share a store with other
// processes must share one Options.Oracle (and should be given a
// Options.Liveness: without one, their locks are judged by their TTL).
//
// # Transactions
//
//	err = db.Update(ctx, func(tx *percolator.Txn) error {
//		v, err := tx.Get(ctx, "Bob", "bal") // ErrNotFound if absent
//		...
//		return tx.Set("Bob", "bal", newValue) // buffered until commit
//	})
//
// Update retries write conflicts with jittered back-off until it commits or
// its context ends; View runs a read-only snapshot; Begin hands out a
// transaction to drive by hand (Commit, Rollback). A transaction reads the
// snapshot at its start timestamp: every transaction that committed before
// it began and nothing after, plus its own writes. Of two concurrent
// transactions that write one cell, at most one commits. A Commit that
// returned nil is durable; one whose outcome could not be learned returns
// ErrCommitUnknown, never success or failure.
//
// # Observers
//
//	err = db.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper})
//	report, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 4, Drain: true})
//
// Every write of an observed column sets a notification in the same atomic
// row write as its lock; scanners find notifications (reading only the
// notify keyspace) and run the column's observers, each in its own
// transaction. At most one run commits per change; changes before a run
// collapse into one; an observer that keeps failing has its notification
// quarantined (Options.MaxFailures). Registrations are stored: every
// process on the store notifies every registered observer's column.
//
// # Errors
//
// Every error is testable with errors.Is against this package's sentinels
// (ErrConflict, ErrNotFound, ErrInvalidArgument, ErrTxnFinished,
// ErrReadOnly, ErrManaged, ErrCommitUnknown, ErrInUse, ErrClosed,
// ErrStoreFailed) and says "percolator: ..."; errors.As finds a
// *ConflictError with the cell and reason of a conflict. Bad input writes
// nothing.
//
// The protocol, its invariants and its storage layout are documented in
// package txn, the observers' in package observer, the store interface in
// package storage, the oracle in package oracle.
package percolator
