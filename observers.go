package percolator

import (
	"context"

	"github.com/seed-992972ee/percolator/observer"
)

// Observer is code that runs, in its own transaction, after a column
// changes (see package observer).
type Observer = observer.Observer

// ObserverFunc is an observer's code.
type ObserverFunc = observer.Func

// WorkerOptions configures RunWorkers.
type WorkerOptions = observer.WorkerOptions

// LoadOptions configures Load.
type LoadOptions = observer.LoadOptions

// Quarantined is a notification set aside after its observer kept failing.
type Quarantined = observer.Quarantined

// ObserverStatus is the notification backlog per observed column and the
// counters of every observer.
type ObserverStatus = observer.Status

// Observe registers o: from its return every write of o.Column, in this
// process or any other on the store, sets a notification, and RunWorkers
// runs o.Fn for it; existing cells of the column are notified too (a
// backfill, finished by a later Observe or RunWorkers if it is cut short).
// Registering a stored name again attaches the code (each process that
// runs workers registers its observers).
func (db *DB) Observe(ctx context.Context, o Observer) error { return db.obs.Register(ctx, o) }

// Notify sets a weak notification on (row, column); column's observers
// must be weak.
func (db *DB) Notify(ctx context.Context, row, column string) error {
	return db.obs.Notify(ctx, row, column)
}

// WorkerReport is what RunWorkers left behind: with Drain, the observers
// whose notifications are pending but have no code in this process.
type WorkerReport = observer.Report

// RunWorkers finishes any backfill a Register left unfinished, then runs
// scanner threads that find notifications and run their observers, until
// ctx ends or, with opts.Drain, no work is left. A drain reports (and
// logs) the observers registered elsewhere whose notifications it left.
func (db *DB) RunWorkers(ctx context.Context, opts WorkerOptions) (WorkerReport, error) {
	return db.obs.Run(ctx, opts)
}

// Unobserve removes the observer named name: no write sets a notification
// for it from its return, in any process. Its acks stay, so observing the
// same name again resumes where it stopped; a column left without
// observers has its notifications cleared by the scanners.
func (db *DB) Unobserve(ctx context.Context, name string) error { return db.obs.Unregister(ctx, name) }

// Load runs fn for items 0..n-1, each in its own transaction retried on
// conflict, at most opts.Concurrency at a time: bulk ingest.
func (db *DB) Load(ctx context.Context, n int, opts LoadOptions, fn func(tx *Txn, item int) error) error {
	return observer.Load(ctx, db.Update, n, opts, fn)
}

// Quarantine lists the quarantined notifications.
func (db *DB) Quarantine(ctx context.Context) ([]Quarantined, error) { return db.obs.Quarantine(ctx) }

// RetryQuarantined re-queues every quarantined notification and returns
// how many.
func (db *DB) RetryQuarantined(ctx context.Context) (int, error) { return db.obs.Retry(ctx) }

// ObserverStatus reads the backlog per observed column and the observers'
// counters.
func (db *DB) ObserverStatus(ctx context.Context) (ObserverStatus, error) {
	return db.obs.Status(ctx)
}

// PendingNotification is a notified cell not yet processed.
type PendingNotification = observer.Pending

// PendingNotifications lists up to limit (0: all) notified cells.
func (db *DB) PendingNotifications(ctx context.Context, limit int) ([]PendingNotification, error) {
	return db.obs.PendingNotifications(ctx, limit)
}
