package percolator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	coordremote "github.com/seed-992972ee/percolator/coord/remote"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// DB is an open database. Safe for concurrent use.
type DB struct {
	opts   Options
	store  storage.Store
	closer []func() error // in reverse order of opening
	client *txn.Client
	obs    *observer.Framework
	format uint64 // the store's on-disk format, checked at open
	// snaps, where the liveness session carries them, publishes this
	// DB's oldest open transaction and reads every process's (gc.go).
	snaps coord.Snapshots
}

// Open opens (creating if needed) the database described by opts: the
// embedded store in opts.Dir, or opts.Store. It fails with ErrInUse while
// another DB or process has the store open.
func Open(ctx context.Context, opts Options) (*DB, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		for _, c := range opts.Closers {
			_ = c.Close()
		}
		return nil, err
	}
	db := &DB{opts: opts}
	for _, c := range opts.Closers {
		db.closer = append(db.closer, c.Close)
	}
	if err := db.open(ctx); err != nil {
		_ = db.Close()
		return nil, apiErr(err)
	}
	return db, nil
}

func (db *DB) open(ctx context.Context) error {
	o := &db.opts
	if o.Server != "" {
		return db.openRemote(ctx)
	}
	if err := db.openStore(); err != nil {
		return err
	}
	// A store of another format is refused before anything reads or
	// writes it.
	var err error
	if db.format, err = txn.EnsureFormat(ctx, db.store); err != nil {
		return err
	}
	owner := o.Owner
	if owner == "" {
		owner = coord.NewOwnerID()
	}
	live := db.liveness(owner)
	var locker coord.Locker = coord.NewLocalLocker()
	if l, ok := o.Liveness.(coord.Locker); ok {
		locker = l
	}
	var check func() error
	if c, ok := o.Liveness.(interface{ Check() error }); ok {
		check = c.Check
	}
	// The client claims an exclusive store (its one apply hook) before the
	// oracle judges the store's lease: only then is "every other owner is
	// dead" (coord.Local) true of this store.
	late, orc := db.newLateOracle()
	client, err := txn.NewClient(ctx, db.store, orc, live, txn.Options{
		Owner: owner, LockTTL: o.LockTTL, ReadThroughLocks: o.ReadThroughLocks, TwoPhaseOnly: o.TwoPhaseOnly, AsyncCommit: o.AsyncCommit, MaxValueSize: o.MaxValueSize, MaxTxnWrites: o.MaxTxnWrites, MaxTxnBytes: o.MaxTxnBytes,
		Logger: o.Logger, Session: check, Now: o.Now,
	})
	if errors.Is(err, storage.ErrInUse) {
		return apiErrMsg(err, "the store is already open in another DB of this process (one DB per embedded store: share it)")
	}
	if err != nil {
		return err
	}
	db.client = client
	db.closer = append(db.closer, func() error { db.client.Close(); return nil })
	if late.o, err = db.openOracle(ctx, owner); err != nil {
		return err
	}
	db.obs, err = observer.New(ctx, db.store, db.client, late.o, locker, observer.Options{Logger: o.Logger, MaxFailures: o.MaxFailures})
	if err != nil {
		return err
	}
	if sn, ok := live.(coord.Snapshots); ok {
		sn.PublishOldest(db.client.OldestActive)
		db.snaps = sn
	}
	db.startCollector()
	return nil
}

// openRemote opens the DB on a server: its store, its oracle (batched in
// this process, one request in flight), and a liveness session that is
// this DB's liveness, its scanners' lock service, and its commits' proof
// of life. Opening is one operation (rpc.WithOperation): a server that is
// restarting is waited for, within the retry budget; and so is each of
// the client's transactions and reads (txn.Options.Operation).
func (db *DB) openRemote(ctx context.Context) error {
	o := &db.opts
	ctx = rpc.WithOperation(ctx)
	dial := rpc.DialOptions{Token: o.Token, CAFile: o.TLSCAFile, RetryBudget: o.RetryBudget, GRPC: o.DialOptions}
	conn, err := rpc.Dial(ctx, o.Server, dial)
	if err != nil {
		return err
	}
	db.closer = append(db.closer, conn.Close)
	// The server checked its store's format; this client writes records
	// of its own, so it must be the same.
	if db.format = max(conn.FormatVersion, 1); db.format != txn.FormatVersion {
		return &txn.FormatError{What: "store", Found: db.format, Build: txn.FormatVersion}
	}
	st, err := remote.New(ctx, conn, remote.Options{})
	if err != nil {
		return err
	}
	db.store = st
	db.closer = append(db.closer, st.Close)
	owner := coord.NewOwnerID()
	sess, err := coordremote.Open(ctx, conn, owner, o.SessionTTL, o.Logger)
	if err != nil {
		return err
	}
	db.closer = append(db.closer, sess.Close)
	// The oracle's stream gets a connection of its own: its one request
	// in flight, which every transaction waits for twice, does not queue
	// behind other calls' frames.
	oconn, err := rpc.Dial(ctx, o.Server, dial)
	if err != nil {
		return err
	}
	db.closer = append(db.closer, oconn.Close)
	orc := oracleremote.NewClient(oconn)
	db.client, err = txn.NewClient(ctx, db.store, orc, sess, txn.Options{
		Owner: owner, LockTTL: o.LockTTL, ReadThroughLocks: o.ReadThroughLocks, TwoPhaseOnly: o.TwoPhaseOnly, AsyncCommit: o.AsyncCommit, MaxValueSize: o.MaxValueSize, MaxTxnWrites: o.MaxTxnWrites, MaxTxnBytes: o.MaxTxnBytes,
		Logger: o.Logger, Session: sess.Check, Now: o.Now,
		Operation: rpc.WithOperation,
	})
	if err != nil {
		return err
	}
	db.closer = append(db.closer, func() error { db.client.Close(); return nil })
	sess.PublishOldest(db.client.OldestActive)
	db.snaps = sess
	db.obs, err = observer.New(ctx, db.store, db.client, orc, sess, observer.Options{Logger: o.Logger, MaxFailures: o.MaxFailures})
	return err
}

// liveness decides how the owners of other transactions' locks are
// judged: by Options.Liveness when set; on a store this DB owns, by the
// in-process registry (every other owner belongs to a process that has
// exited, so its locks are rolled back at once); on a store shared with
// other processes and no liveness service, by the locks' TTL alone
// (coord.TTLOnly), since this process cannot tell a live peer from a dead
// one.
func (db *DB) liveness(owner string) coord.Liveness {
	switch {
	case db.opts.Liveness != nil:
		return db.opts.Liveness
	case txn.Owns(db.store):
		local := coord.NewLocal()
		local.Register(owner)
		return local
	}
	return coord.TTLOnly{}
}

// lateOracle is the client's oracle, opened after the client has claimed
// the store (see open).
type lateOracle struct{ o txn.Oracle }

func (l *lateOracle) Timestamp(ctx context.Context) (uint64, error) { return l.o.Timestamp(ctx) }

// lateVersionedOracle is the lateOracle of an Options.Oracle that is a
// txn.VersionedOracle (an elected oracle's client, oracle/etcd): it passes
// TimestampVersion on, since hiding it would cost every commit on a
// shared store a registry read of its own.
type lateVersionedOracle struct{ *lateOracle }

func (l lateVersionedOracle) TimestampVersion(ctx context.Context) (ts, version uint64, ok bool, err error) {
	return l.o.(txn.VersionedOracle).TimestampVersion(ctx)
}

// newLateOracle returns the lateOracle to fill and the client's oracle
// over it: versioned when Options.Oracle is.
func (db *DB) newLateOracle() (*lateOracle, txn.Oracle) {
	late := &lateOracle{}
	if _, ok := db.opts.Oracle.(txn.VersionedOracle); ok {
		return late, lateVersionedOracle{late}
	}
	return late, late
}

func (db *DB) openStore() error {
	switch {
	case db.opts.Store != nil:
		// Another DB's Store() is a user's view of the store: this DB
		// keeps the library's cells in it too.
		db.store = userstore.Raw(db.opts.Store)
		return nil
	case db.opts.Dir == "":
		db.store = memory.New()
	default:
		// pebble.Open creates Dir (and syncs the new directories'
		// entries: a power cut must not take a new store away).
		st, err := pebble.Open(filepath.Join(db.opts.Dir, "store"), pebble.Options{Logger: warnOnly(db.opts.Logger), MustExist: db.opts.MustExist, DiskReserve: db.opts.DiskReserve})
		if errors.Is(err, pebble.ErrNotExist) {
			return apiErrMsg(err, "no store at %s", db.opts.Dir)
		}
		if err != nil {
			return err
		}
		db.store = st
	}
	db.closer = append(db.closer, db.store.Close)
	return nil
}

// openOracle returns Options.Oracle, or opens the store's own allocator:
// its high-water mark and a lease live in the store (oracle.FamilyOracle),
// so timestamps never restart below what the store holds, and a second DB
// on the store without a shared oracle is refused while this one holds
// the lease.
func (db *DB) openOracle(ctx context.Context, owner string) (txn.Oracle, error) {
	if db.opts.Oracle != nil {
		return db.opts.Oracle, nil
	}
	alloc, err := oracle.OpenStoreAllocator(ctx, db.store, oracle.StoreOptions{
		Owner: owner, Exclusive: db.client.Indexed(), TTL: db.opts.LockTTL, Logger: db.opts.Logger,
		Recover: func(ctx context.Context) (uint64, error) { return txn.NewestTimestamp(ctx, db.store) },
	})
	var held *oracle.HeldError
	if errors.As(err, &held) {
		return nil, apiErrMsg(err, "the store's timestamp oracle is held by %s until %s: DBs that share a store must share one Options.Oracle",
			held.Owner, held.Until.Format(time.RFC3339))
	}
	if err != nil {
		return nil, err
	}
	db.closer = append(db.closer, alloc.Close)
	if st, ok := db.store.(*pebble.Store); ok && db.client.Indexed() {
		// The store's owner runs its oracle: one-row transactions commit
		// in one call (txn/doc.go, "One-phase commit").
		st.SetStamper(alloc)
	}
	return oracle.NewClient(alloc), nil
}

// Close releases the database. Transactions still running fail.
func (db *DB) Close() error {
	var errs []error
	for i := len(db.closer) - 1; i >= 0; i-- {
		errs = append(errs, db.closer[i]())
	}
	db.closer = nil
	return errors.Join(errs...)
}

// Begin starts a read-write transaction. Commit or Rollback it.
func (db *DB) Begin(ctx context.Context) (*Txn, error) {
	t, err := db.client.Begin(ctx)
	if err != nil {
		return nil, apiErr(err)
	}
	return &Txn{t}, nil
}

// BeginReadOnly starts a read-only transaction; it never writes locks.
// On the embedded store its snapshot starts just above the newest commit
// this DB acknowledged or returned from a read: every commit that
// returned before it began is in it, one still waiting for its log sync
// may not be, and its StartTS may be shared with other read-only
// transactions.
func (db *DB) BeginReadOnly(ctx context.Context) (*Txn, error) {
	t, err := db.client.BeginReadOnly(ctx)
	if err != nil {
		return nil, apiErr(err)
	}
	return &Txn{t}, nil
}

// Update runs fn in a read-write transaction and commits it, retrying the
// whole of fn with jittered back-off while it fails with ErrConflict, until
// it commits, fn returns another error (returned as it is), the context
// ends, or MaxAttempts is reached. fn may run more than once: it must not
// have side effects outside the transaction.
func (db *DB) Update(ctx context.Context, fn func(tx *Txn) error) error {
	return db.update(ctx, func(t *txn.Txn) error { return fn(&Txn{t}) })
}

// update is Update over the protocol's transactions.
func (db *DB) update(ctx context.Context, fn func(t *txn.Txn) error) error {
	for attempt := 0; ; attempt++ {
		err := db.tryUpdate(ctx, fn)
		if !errors.Is(err, ErrConflict) || (db.opts.MaxAttempts > 0 && attempt+1 >= db.opts.MaxAttempts) {
			return err
		}
		if werr := ctxwait.Sleep(ctx, db.client.Backoff(attempt)); werr != nil {
			return fmt.Errorf("%w (gave up: %v)", err, werr)
		}
	}
}

func (db *DB) tryUpdate(ctx context.Context, fn func(t *txn.Txn) error) error {
	// Over a server, the start timestamp comes with the first read.
	t, err := db.client.BeginDeferred(ctx, false)
	if err != nil {
		return apiErr(err)
	}
	if err := fn(t); err != nil {
		_ = t.Rollback(ctx)
		return err
	}
	return apiErr(t.Commit(ctx))
}

// View runs fn in a read-only snapshot transaction (as BeginReadOnly's);
// fn's error is returned as it is.
func (db *DB) View(ctx context.Context, fn func(tx *Txn) error) error {
	t, err := db.client.BeginDeferred(ctx, true)
	if err != nil {
		return apiErr(err)
	}
	defer func() { _ = t.Rollback(ctx) }()
	return fn(&Txn{t})
}

// Store is the DB's store, for the packages that keep their own cells
// beside the transactions' (graph, lock and queue: pass it to their New)
// and for cells of families of your own. It refuses what would change
// what the library keeps in the store, with an error matching
// ErrInvalidArgument (and storage.ErrReserved), changing nothing: any
// call naming a reserved row (storage.ReservedPrefix: the oracle's mark
// and lease), a write to a family the library keeps its cells in (the
// transactions' data, lock, write and notify; oracle; the observers'
// observers, observer_backfill, quarantine, observer_stats and
// observer_partitions; lock's mutex, queue's queue and graph's graph),
// a DeleteRow, and Close (close the DB). Reads of any family but the
// reserved rows pass, and a scan stops short of the reserved rows.
func (db *DB) Store() storage.Store { return userstore.Wrap(db.store, apiErr) }

// FormatVersion is the on-disk format of the DB's store, as checked at
// Open: FormatVersion, or the DB would not have opened.
func (db *DB) FormatVersion() uint64 { return db.format }

// MaxValueSize is the largest value a cell of this DB may hold
// (Options.MaxValueSize).
func (db *DB) MaxValueSize() int { return db.opts.MaxValueSize }

// TxnLimits are the most cells (writes) and bytes one transaction of this
// DB may write (Options.MaxTxnWrites and MaxTxnBytes, defaults applied).
func (db *DB) TxnLimits() (writes, bytes int) {
	writes, bytes = db.opts.MaxTxnWrites, db.opts.MaxTxnBytes
	if writes == 0 {
		writes = txn.DefaultMaxTxnWrites
	}
	if bytes == 0 {
		bytes = txn.DefaultMaxTxnBytes
	}
	return writes, bytes
}

// Stats counts this DB's protocol events since Open: Commits, Conflicts
// and Aborts of its transactions; locks of others it RolledForward (their
// transaction had committed) and RolledBack (its owner was dead or the lock
// expired); LockWaits (reads that waited on a live lock) and
// PrewriteResolved (prewrites that resolved a blocking lock and went on).
type Stats = txn.Stats

// Stats returns the protocol counters of this DB since Open.
func (db *DB) Stats() Stats { return db.client.Stats() }

// LockInfo describes one lock in the store: the cell (Row, Column), the
// StartTS of its transaction, the Lock record (Op, PrimaryRow and
// PrimaryCol of the transaction's primary, Owner, WallMS and TTLMS, and
// the value when small) and when it Expires without a heartbeat.
type LockInfo = txn.LockInfo

// Locks lists the locks currently in the store.
func (db *DB) Locks(ctx context.Context) ([]LockInfo, error) {
	l, err := db.client.Locks(ctx)
	return l, apiErr(err)
}

// ResolveLocks settles every lock of a committed, rolled-back, dead or
// expired transaction, and returns how many it settled.
func (db *DB) ResolveLocks(ctx context.Context) (int, error) { return db.ResolveLocksWith(ctx, nil) }

// ResolveLocksWith is ResolveLocks reporting its progress: progress, if
// not nil, is called with (0, total) once the locks are listed and with
// (done, total) after each is looked at.
func (db *DB) ResolveLocksWith(ctx context.Context, progress func(done, total int)) (int, error) {
	n, err := db.client.ResolveLocks(ctx, progress)
	return n, apiErr(err)
}

// RawRow returns the protocol's cells of row, every version of every
// column: data (values too large to inline, at their start_ts), lock and
// write (commit records at commit_ts, rollback records at start_ts). For
// inspection: percolator dump renders them with txn.CellFormat (as
// txn.FormatCell does for the protocol's test scenarios).
func (db *DB) RawRow(ctx context.Context, row string) ([]storage.Cell, error) {
	c, err := db.client.RawRow(ctx, []byte(row))
	return c, apiErr(err)
}

// Rows lists up to limit rows holding any write record or lock, from start.
func (db *DB) Rows(ctx context.Context, start string, limit int) ([]string, error) {
	keys, err := db.client.Rows(ctx, []byte(start), limit)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out, apiErr(err)
}
