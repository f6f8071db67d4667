package percolator

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator/coord"
	coordremote "github.com/seed-992972ee/percolator/coord/remote"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// Options configures Open. The zero value opens an in-memory database.
type Options struct {
	// Dir is the directory of the embedded store; "" keeps everything in
	// memory (lost at Close).
	Dir string
	// Server, if set, is the address of a percolator server (percolator
	// serve): its store, oracle and lock service are used over gRPC, with
	// a liveness session for this DB (SessionTTL) and nonces for retried
	// calls. Many processes may open DBs on one server at once.
	Server string
	// Token is sent to the server on every call (its --token-file).
	Token string
	// TLSCAFile, if set, connects to the server with TLS, trusting the CA
	// certificate in this PEM file.
	TLSCAFile string
	// DialOptions, with Server: more gRPC dial options for the DB's
	// connections to the server (rpc.DialOptions.GRPC), applied after
	// its own: an interceptor that counts or traces its calls, say.
	DialOptions []grpc.DialOption
	// SessionTTL is the lease of this DB's liveness session with the
	// server, renewed every third of it. Default 10s
	// (coord/remote.DefaultTTL).
	SessionTTL time.Duration
	// RetryBudget, with Server: how long an operation (a transaction's
	// commit with its abort and cleanup, a read with its lock waits, Open
	// itself) goes on retrying while the server does not answer (down,
	// restarting, unreachable) before it fails with ErrUnavailable naming
	// the server. Through cluster.Open: how long opening waits for etcd.
	// Default 30s (rpc.DefaultRetryBudget).
	RetryBudget time.Duration
	// Store, if set, is used instead of Dir's store (a server's or
	// Bigtable's). The DB does not close it. An exclusive store (an
	// embedded one: storage.Exclusive) takes one DB at a time; a second
	// fails to open with an error matching storage.ErrInUse.
	Store storage.Store
	// Oracle, if set, hands out timestamps instead of the store's own
	// allocator, whose high-water mark and lease live in the store
	// (oracle.OpenStoreAllocator): share one Oracle between DBs that share
	// a store. It must never hand out a timestamp at or below one already
	// used in the store. Without it, a second DB on a shared store is
	// refused while the first holds the store's oracle lease.
	Oracle txn.Oracle
	// Liveness, if set, decides whether lock owners are alive. Without it,
	// a DB that owns its store exclusively judges every other owner dead
	// (their process has exited), and a DB on a shared store judges
	// another process's locks by their TTL alone (coord.TTLOnly): it never
	// rolls back a transaction whose owner keeps its lock fresh.
	//
	// A liveness session (coord/etcd's Session) usually does more, and
	// the DB uses what it finds: a coord.Locker gives the scanners their
	// advisory row locks (default: in this process only), and a
	// Check() error method is the process's proof of life, checked just
	// before every commit point (a commit of a process whose session may
	// have expired aborts with ErrSessionLost), and a Membership()
	// method makes RunWorkers split the notify keyspace with the other
	// workers (WorkerOptions.Membership). Set Owner to the owner the
	// session keeps alive.
	Liveness coord.Liveness
	// Owner is this DB's identity in its locks. With a Liveness session
	// it must be the owner the session keeps alive; otherwise leave it
	// empty for a fresh coord.NewOwnerID().
	Owner string
	// LockTTL: how long a lock of a live-but-silent owner stays valid.
	// Default 10s; at least 1ms (a lock's TTL is kept in whole
	// milliseconds).
	LockTTL time.Duration
	// ReadThroughLocks makes a read that meets the lock of a live
	// transaction older than its snapshot push that transaction's commit
	// timestamp past the snapshot and read past the lock, instead of
	// waiting for it to commit or die (txn/doc.go, "Reads through
	// locks"). Writers still wait. Default off.
	ReadThroughLocks bool
	// TwoPhaseOnly commits every transaction in two phases. By default a
	// transaction whose writes fall in one row commits in one call, its
	// commit timestamp taken under the row's latch, embedded (a DB on
	// Dir with its own oracle) and over a server (txn/doc.go, "One-phase
	// commit"); on Bigtable, and in a DB that runs observers, always in
	// two.
	TwoPhaseOnly bool
	// AsyncCommit commits a small transaction that writes several rows
	// once all its prewrites are in, without a commit point of its own:
	// one call to the store, which stamps each lock with a timestamp its
	// oracle hands out under the rows' latches; the transaction commits
	// at the greatest, and its commit records follow in the background
	// (txn/doc.go, "Async commit"). Embedded (a DB on Dir with its own
	// oracle) and over a server; small is at most 256 cells whose rows
	// and columns weigh 4 KiB. Elsewhere, and with TwoPhaseOnly, commits
	// are two-phase. Every process on a store must be of a build that
	// knows async locks (one that does not fails its reads at one,
	// never rolls it back). Default off.
	AsyncCommit bool
	// Now is the wall clock this DB stamps its locks with and judges
	// other processes' locks' TTLs by. Default time.Now. The clocks of
	// processes sharing a store may disagree: correctness never depends on
	// them (a lock judged expired too early is rolled back, and its
	// owner's commit then fails); percolator verify's skew fault gives
	// its clients skewed ones.
	Now func() time.Time
	// MaxValueSize is the largest value a cell may hold. Default 10 MiB.
	MaxValueSize int
	// MaxTxnWrites and MaxTxnBytes bound one transaction's writes: the
	// cells it writes and their bytes (row, column and value of each).
	// Set and Delete past them fail with ErrTxnTooLarge and buffer
	// nothing. Defaults 100,000 cells and 100 MiB, what one commit writes
	// well within its lock TTL, which grows with the transaction's size
	// (6s per √MiB, at most 50s more) while heartbeats keep it alive.
	MaxTxnWrites int
	MaxTxnBytes  int
	// GCLifetime is how long a snapshot stays readable at least: the
	// garbage collector removes only versions no snapshot younger than
	// this reads (precisely: a sampled timestamp may become the safe point
	// once this long has passed since, on this process's clock; a
	// transaction open longer holds it back while its process lives).
	// Default 10 minutes (txn.DefaultGCLifetime). A transaction older
	// than the safe point fails its reads with ErrSnapshotTooOld.
	GCLifetime time.Duration
	// DisableGC turns off the background garbage collector this DB runs
	// when it owns its store (Dir, or in memory). DB.GC still runs a pass
	// when called. On a server, the server collects (serve
	// --gc-lifetime); on Bigtable, the workers.
	DisableGC bool
	// DiskReserve is the disk space, in bytes, an embedded store (Dir)
	// keeps for garbage collection, which needs log space to free space:
	// while less is free, writes fail with ErrNoSpace and the collector
	// still writes (and compacts after every pass) until enough is free
	// again. 0 means 64 MiB; negative, none.
	DiskReserve int64
	// gcDelay is the collector's wait between a new safe point and its
	// deletions (txn.CollectorOptions.Delay; test knob).
	gcDelay time.Duration
	// MaxAttempts bounds how many times Update runs its function while
	// its commits conflict (1: once, with no retry); 0 retries until the
	// context ends.
	MaxAttempts int
	// Deprecated: MaxRetries is the old name of MaxAttempts, which it
	// sets when MaxAttempts is 0: it always counted attempts, not
	// retries (MaxRetries 1 retried nothing).
	MaxRetries int
	// MustExist makes Open fail with ErrNoStore, creating nothing, when Dir
	// holds no store (read-only tools: a typo must not create an empty
	// store and report it as empty).
	MustExist bool
	// MaxFailures is how many failed runs in a row of one observer on one
	// cell (an error, a panic, a commit that cannot succeed) quarantine
	// its notification. Default 5.
	MaxFailures int
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// Closers are closed by the DB's Close, last to first, after the DB
	// itself: the clients its Store, Oracle and Liveness use, opened for
	// it by the caller (cluster.Open hands them over this way). Open owns
	// them from the call: it closes them when it fails.
	Closers []io.Closer
}

// EnsureDefaults fills zero fields with defaults.
func (o *Options) EnsureDefaults() {
	if o.LockTTL == 0 {
		o.LockTTL = 10 * time.Second
	}
	if o.MaxValueSize == 0 {
		o.MaxValueSize = 10 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = coordremote.DefaultTTL
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = 5
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = o.MaxRetries
	}
	if o.GCLifetime == 0 {
		o.GCLifetime = txn.DefaultGCLifetime
	}
}

// Validate checks the options after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.MaxTxnWrites < 0 || o.MaxTxnBytes < 0:
		return fmt.Errorf("%w: negative transaction limit (MaxTxnWrites %d, MaxTxnBytes %d; 0 means the default)", ErrInvalidArgument, o.MaxTxnWrites, o.MaxTxnBytes)
	case o.GCLifetime < 0:
		return fmt.Errorf("%w: negative GCLifetime %v (0 means the default, 10 minutes; DisableGC turns the collector off)", ErrInvalidArgument, o.GCLifetime)
	case o.LockTTL < 0 || o.MaxValueSize < 0 || o.MaxAttempts < 0 || o.MaxRetries < 0 || o.MaxFailures < 0:
		return fmt.Errorf("%w: negative option", ErrInvalidArgument)
	case o.LockTTL != 0 && o.LockTTL < time.Millisecond:
		return fmt.Errorf("%w: LockTTL %v below 1ms", ErrInvalidArgument, o.LockTTL)
	case o.Store != nil && o.Dir != "":
		return fmt.Errorf("%w: both Dir and Store set", ErrInvalidArgument)
	case o.Server == "" && len(o.DialOptions) > 0:
		return fmt.Errorf("%w: DialOptions without Server (they are the server connections' options)", ErrInvalidArgument)
	case o.Server != "" && (o.Store != nil || o.Dir != "" || o.Oracle != nil || o.Liveness != nil):
		return fmt.Errorf("%w: Server excludes Dir, Store, Oracle and Liveness (the server provides them)", ErrInvalidArgument)
	case o.Owner != "" && o.Liveness == nil:
		return fmt.Errorf("%w: Owner needs the Liveness that keeps it alive", ErrInvalidArgument)
	case o.SessionTTL < 0:
		return fmt.Errorf("%w: negative SessionTTL", ErrInvalidArgument)
	case o.RetryBudget < 0:
		return fmt.Errorf("%w: negative RetryBudget", ErrInvalidArgument)
	case o.MustExist && o.Dir == "":
		return fmt.Errorf("%w: MustExist needs Dir", ErrInvalidArgument)
	}
	return nil
}
