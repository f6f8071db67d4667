package percolator

import (
	"context"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/txn"
)

// ObserverFunc is an observer's code: it runs in its own transaction tx
// after (row, column) changed, and may read and write anything through tx.
// Returning nil commits tx; returning an error (or panicking) rolls it back
// and the run is retried with back-off, its notification quarantined after
// Options.MaxFailures failures in a row. The framework ends tx: tx.Commit
// and tx.Rollback return ErrManaged. A conflict (ErrConflict) is not a
// failure: another run of the same change won, or will.
type ObserverFunc func(ctx context.Context, tx *Txn, row, column string) error

// Observer is code that runs, in its own transaction, after a column
// changes: at most one run commits per change, several changes before a
// run are collapsed into one, and a crash loses none (package observer has
// the invariants).
type Observer struct {
	// Name identifies the observer in the store: [A-Za-z0-9][A-Za-z0-9_-]{0,63}.
	Name string
	// Column is the observed user column.
	Column string
	// Weak observers run on Notify: the column holds no data, only
	// notifications; no ack, no conflict, a run may repeat.
	Weak bool
	// Fn is the code.
	Fn ObserverFunc
}

// WorkerOptions configures RunWorkers. The zero value is usable.
type WorkerOptions struct {
	// Scanners is the number of scanner threads. 0 means 1.
	Scanners int
	// Batch is how many notified rows a scanner reads per scan. 0 means 64.
	Batch int
	// MaxIdle bounds the back-off of a scanner that finds nothing. 0 means
	// 200ms.
	MaxIdle time.Duration
	// Drain makes RunWorkers return once a pass over every notification
	// finds nothing it can run (all processed, quarantined, or waiting for
	// an observer this process did not register: see WorkerReport).
	Drain bool
	// CompactAfter is how many cleared notifications make the notify
	// keyspace worth compacting (an LSM keeps deleted notifications as
	// tombstones that scans still visit). 0 means 1024; negative disables.
	CompactAfter int

	// Membership splits the notify keyspace among the workers that share
	// it (observer's "Partitioned finding"): each worker scans mostly its
	// own range, re-balanced as workers join and die, with passes over the
	// whole keyspace as the fallback. nil means the DB's own when its
	// Liveness offers one (coord/etcd's Session, as cluster.Open sets),
	// else none: every scanner scans the whole keyspace from random places
	// (the paper's scheme, right for one worker alone).
	Membership coord.Membership
	// Group is the membership group of the workers that split one notify
	// keyspace. "" means observer.DefaultGroup.
	Group string
	// Unpartitioned scans the whole keyspace from random places even where
	// a Membership is available.
	Unpartitioned bool
}

// membershipSource is a Liveness that also offers group membership
// (coord/etcd's Session).
type membershipSource interface{ Membership() coord.Membership }

func (db *DB) workerOptions(o WorkerOptions) observer.WorkerOptions {
	w := observer.WorkerOptions{Scanners: o.Scanners, Batch: o.Batch, MaxIdle: o.MaxIdle, Drain: o.Drain, CompactAfter: o.CompactAfter, Group: o.Group}
	if !o.Unpartitioned {
		w.Membership = o.Membership
		if m, ok := db.opts.Liveness.(membershipSource); ok && w.Membership == nil {
			w.Membership = m.Membership()
		}
	}
	return w
}

// WorkerReport is what RunWorkers left behind. After a drain, Unhandled
// lists the observers (Observer, Column, Pending cells) whose
// notifications are pending but whose code this process did not register:
// they wait for a process that registers them.
type WorkerReport = observer.Report

// LoadOptions configures Load: Concurrency bounds the loader transactions
// in flight (default 8); Progress, if set, is called after each committed
// item with the count so far and the total.
type LoadOptions = observer.LoadOptions

// Quarantined is a notification set aside after its observer kept
// failing: the cell (Row, Column), the Observer, how many Failures in a
// row, the last Error, and when (WallMS, Unix milliseconds).
type Quarantined = observer.Quarantined

// ObserverStatus is what `percolator status` shows: the notification
// backlog per observed column (Columns: Pending cells and the age of the
// Oldest), every observer's stored counters (Observers: runs, commits,
// conflicts, failures, quarantined, self_triggers), the Quarantined count,
// and the scanners' counters (Scanners: scans, scan_rows, scan_keys,
// scan_micros, scanner_jumps, compactions).
type ObserverStatus = observer.Status

// PartitionStatus is the range of the notify keyspace a partitioned
// worker published (ObserverStatus.Partitions): its Owner, its range
// [Start, End) and its Backlog.
type PartitionStatus = observer.PartitionStatus

// PendingNotification is a notified cell not yet processed: Row, Column,
// the Versions collapsed into its next run, and the Age of the oldest.
type PendingNotification = observer.Pending

// Observe registers o: from its return every write of o.Column, in this
// process or any other on the store, sets a notification, and RunWorkers
// runs o.Fn for it; existing cells of the column are notified too (a
// backfill, finished by a later Observe or RunWorkers if it is cut short).
// Registering a stored name again attaches the code (each process that
// runs workers registers its observers). With o.Fn nil, Observe stores
// the registration alone (a restore of a backup does): writes notify,
// and the notifications wait for a process that observes the name with
// its code.
func (db *DB) Observe(ctx context.Context, o Observer) error {
	io := observer.Observer{Name: o.Name, Column: o.Column, Weak: o.Weak}
	if fn := o.Fn; fn != nil {
		io.Fn = func(ctx context.Context, t *txn.Txn, row, column string) error { return fn(ctx, &Txn{t}, row, column) }
	}
	return apiErr(db.obs.Register(ctx, io))
}

// Observers lists the observers registered on the store, by any process,
// sorted by name: Name, Column and Weak as stored, Fn nil.
func (db *DB) Observers(ctx context.Context) ([]Observer, error) {
	regs, err := db.obs.Registrations(ctx)
	if err != nil {
		return nil, apiErr(err)
	}
	out := make([]Observer, len(regs))
	for i, g := range regs {
		out[i] = Observer{Name: g.Name, Column: g.Column, Weak: g.Weak}
	}
	return out, nil
}

// Validate checks o's name and column as Observe does (ErrInvalidArgument),
// without the store: whether the name is free, and the column's other
// observers of the same kind, are Observe's to check.
func (o Observer) Validate() error {
	return apiErr(observer.Observer{Name: o.Name, Column: o.Column, Weak: o.Weak}.Validate())
}

// Unobserve removes the observer named name: no write sets a notification
// for it from its return, in any process. Its acks stay, so observing the
// same name again resumes where it stopped (use a new name to process
// every cell afresh); a column left without observers has its
// notifications cleared by the scanners.
func (db *DB) Unobserve(ctx context.Context, name string) error {
	return apiErr(db.obs.Unregister(ctx, name))
}

// Notify sets a weak notification on (row, column); column's observers
// must be weak.
func (db *DB) Notify(ctx context.Context, row, column string) error {
	return apiErr(db.obs.Notify(ctx, row, column))
}

// RunWorkers finishes any backfill an Observe left unfinished, then runs
// scanner threads that find notifications and run their observers, until
// ctx ends or, with opts.Drain, no work is left. A drain reports (and
// logs) the observers registered elsewhere whose notifications it left.
func (db *DB) RunWorkers(ctx context.Context, opts WorkerOptions) (WorkerReport, error) {
	rep, err := db.obs.Run(ctx, db.workerOptions(opts))
	return rep, apiErr(err)
}

// Load runs fn for items 0..n-1, each in its own transaction retried on
// conflict, at most opts.Concurrency at a time: bulk ingest.
func (db *DB) Load(ctx context.Context, n int, opts LoadOptions, fn func(tx *Txn, item int) error) error {
	return apiErr(observer.Load(ctx, db.update, n, opts, func(t *txn.Txn, i int) error { return fn(&Txn{t}, i) }))
}

// Quarantine lists the quarantined notifications.
func (db *DB) Quarantine(ctx context.Context) ([]Quarantined, error) {
	q, err := db.obs.Quarantine(ctx)
	return q, apiErr(err)
}

// RetryQuarantined re-queues every quarantined notification and returns
// how many.
func (db *DB) RetryQuarantined(ctx context.Context) (int, error) {
	return db.RetryQuarantinedWith(ctx, nil)
}

// RetryQuarantinedWith is RetryQuarantined reporting its progress:
// progress, if not nil, is called with (0, total) once the quarantined
// notifications are listed and with (done, total) after each is
// re-queued.
func (db *DB) RetryQuarantinedWith(ctx context.Context, progress func(done, total int)) (int, error) {
	n, err := db.obs.Retry(ctx, progress)
	return n, apiErr(err)
}

// ObserverStatus reads the backlog per observed column and the observers'
// counters.
func (db *DB) ObserverStatus(ctx context.Context) (ObserverStatus, error) {
	st, err := db.obs.Status(ctx)
	return st, apiErr(err)
}

// PendingNotifications lists up to limit (0: all) notified cells.
func (db *DB) PendingNotifications(ctx context.Context, limit int) ([]PendingNotification, error) {
	p, err := db.obs.PendingNotifications(ctx, limit)
	return p, apiErr(err)
}
