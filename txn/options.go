package txn

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Options configures a Client. The zero value is usable.
type Options struct {
	// Owner is this process's identity, written into every lock. Default:
	// a fresh coord.NewOwnerID().
	Owner string
	// LockTTL is how long a lock stays valid without a heartbeat when its
	// owner's liveness cannot be decided. Default 10s.
	LockTTL time.Duration
	// MaxValueSize is the largest value a cell may hold. Default 10 MiB.
	MaxValueSize int
	// MaxTxnWrites bounds the cells one transaction writes, and
	// MaxTxnBytes their bytes (row, column and value of each): a write past
	// them fails with ErrTxnTooLarge. Defaults 100,000 and 100 MiB
	// (TiKV's total-size limit): at 16 prewrites in flight, 100,000 cells
	// are written within a 10s lock TTL over a server (about 1ms each),
	// and the TTL grows with the size besides (lockTTL).
	MaxTxnWrites int
	MaxTxnBytes  int
	// InlineSize is the largest value stored inline in the lock and write
	// records instead of in c:data. Default 4 KiB; negative: never inline.
	InlineSize int
	// StoreRetries is how many times an idempotent storage call is re-sent
	// after an error before giving up. Default 3.
	StoreRetries int
	// Now is the wall clock. Default time.Now.
	Now func() time.Time
	// Rand returns a uniform random number in [0, n), for the jitter of
	// back-offs; it must be safe for concurrent use. Default
	// math/rand/v2's Int64N.
	Rand func(n int64) int64
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// Session, if set, reports whether this process can prove it is alive
	// (its liveness session with the lock service is live). A commit checks
	// it just before its commit point and aborts with ErrSessionLost when
	// it cannot: others may be judging its locks dead. An optimisation
	// only: a process can pass the check and be paused before its commit
	// call; the primary's CheckAndMutate keeps that safe.
	Session func() error
	// IndexShards is the number of shards of the in-memory lock index.
	// Default 256.
	IndexShards int
	// Operation, if set, wraps the context of each of the client's
	// operations: a commit with its abort and cleanup, a read (Get, Scan)
	// with its lock waits and resolutions, a listing or resolution of the
	// locks. A store that retries on its own can then bound the operation
	// as a whole rather than each call (over a server: rpc.WithOperation,
	// whose retry budget covers the operation). Default: none.
	Operation func(context.Context) context.Context
	// CleanupTimeout bounds what a commit does after its context ended:
	// rolling back what it prewrote, or finishing its commit point (an
	// outcome not learned by then is ErrCommitUnknown). Default 1s.
	CleanupTimeout time.Duration
	// ReadThroughLocks makes a read that meets the lock of a live
	// transaction older than its snapshot push that transaction's commit
	// timestamp above its start_ts, at the primary, and read past the
	// lock rather than wait for it (doc.go, "Reads through locks"). It
	// needs a store whose conditional writes take an unless filter
	// (storage.Unlessed, or storage.Epoched): without one, reads wait.
	// Writers never push. Default off.
	ReadThroughLocks bool
	// TwoPhaseOnly commits every transaction in two phases. Without it,
	// a transaction whose writes fall in one row commits in one call
	// where the store takes one-phase commits (storage.OnePhaser: an
	// embedded store or a server, whose process runs the oracle) and
	// this client has no observer registry (doc.go, "One-phase commit").
	TwoPhaseOnly bool
	// AsyncCommit commits a small transaction that writes several rows
	// as soon as all of its prewrites are in, in one call to a store
	// that takes the timestamps itself (storage.AsyncPrewriter: an
	// embedded store or a server), without a commit point of its own:
	// each lock records the timestamp the store took, the primary's names
	// the other rows, and the transaction commits at the greatest of
	// them; its commit records follow in the background (doc.go, "Async
	// commit"). Small: at most AsyncMaxWrites cells, whose rows and
	// columns weigh at most AsyncMaxKeyBytes; a larger transaction, or
	// one on another store, commits in two phases. TwoPhaseOnly turns it
	// off. Default off.
	AsyncCommit bool

	// indexCap bounds each index shard's latest-commit and write-record
	// maps (test knob: small, so tests drop full maps often). 0: default.
	indexCap int
	// safePointCache is how long a read safe point is used (test knob:
	// negative reads it for every check). 0: SafePointCache.
	// afterStartTS, if set, runs in Begin between the start timestamp's
	// allocation and the transaction's registration (test knob).
	afterStartTS func()
	// freshReadOnly gives read-only transactions a fresh start timestamp
	// on a store this client owns too (test knob: the comparison).
	freshReadOnly  bool
	safePointCache time.Duration
}

// The transaction limits' defaults (Options.MaxTxnWrites, MaxTxnBytes).
const (
	DefaultMaxTxnWrites = 100_000
	DefaultMaxTxnBytes  = 100 << 20
)

// EnsureDefaults fills zero fields with defaults.
func (o *Options) EnsureDefaults() {
	if o.LockTTL == 0 {
		o.LockTTL = 10 * time.Second
	}
	if o.MaxValueSize == 0 {
		o.MaxValueSize = 10 << 20
	}
	if o.MaxTxnWrites == 0 {
		o.MaxTxnWrites = DefaultMaxTxnWrites
	}
	if o.MaxTxnBytes == 0 {
		o.MaxTxnBytes = DefaultMaxTxnBytes
	}
	if o.InlineSize == 0 {
		o.InlineSize = 4 << 10
	}
	if o.StoreRetries == 0 {
		o.StoreRetries = 3
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Int64N
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.InlineSize > o.MaxValueSize {
		o.InlineSize = o.MaxValueSize
	}
	if o.IndexShards == 0 {
		o.IndexShards = 256
	}
	if o.CleanupTimeout == 0 {
		o.CleanupTimeout = time.Second
	}
}

// Validate checks the options after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	case o.LockTTL < time.Millisecond:
		return fmt.Errorf("%w: lock TTL %v below 1ms", ErrInvalidArgument, o.LockTTL)
	case o.MaxValueSize < 0 || o.StoreRetries < 0 || o.IndexShards < 0 || o.CleanupTimeout < 0:
		return fmt.Errorf("%w: negative size or count", ErrInvalidArgument)
	case o.MaxTxnWrites < 0 || o.MaxTxnBytes < 0:
		return fmt.Errorf("%w: negative transaction limit (MaxTxnWrites %d, MaxTxnBytes %d)", ErrInvalidArgument, o.MaxTxnWrites, o.MaxTxnBytes)
	}
	return nil
}
