package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/storage"
)

// Oracle hands out strictly increasing timestamps (oracle.Client).
type Oracle interface {
	Timestamp(ctx context.Context) (uint64, error)
}

// Client runs transactions against one store. Safe for concurrent use. On
// an exclusive store it keeps the in-memory index through the store's one
// ApplyHook, so a second Client of the same store fails to open
// (storage.ErrInUse) until the first is closed.
type Client struct {
	store storage.Store
	// batch is nil when the store cannot batch. Every batch txn sends is
	// safe to apply twice under any reordering (secondary commits,
	// notifications written ahead), so on a store that offers it (a
	// server) it is the variant without a nonce, and batchIdem is set.
	batch     storage.Batcher
	batchIdem bool
	// notify is the store's notify keyspace.
	notify NotifySpace
	// unversioned counts down the commits that skip the oracle's registry
	// version after a reply came without one (notifyAndTimestamp).
	unversioned atomic.Int64
	// deferred is nil unless the store has one ordered log (Pebble): then
	// prewrites and secondary commits skip their own sync, made durable by
	// the primary's durable commit (doc.go, "Durability").
	deferred storage.Deferred
	// epoched is set on a store with epochs (a server): a transaction's
	// prewrites go in one call per chunk, answered before their sync, and
	// its commit point carries their epoch (epoch.go).
	epoched storage.Epoched
	idem    storage.Idempotent // a remote store: protocol CASes carry no nonce
	// unlessed is set on a store whose conditional writes take an unless
	// filter: the commit point then honours pushes (push.go), which
	// readers make only where it is set (or epoched is).
	unlessed storage.Unlessed
	// onePhase is set on a store that takes one-phase commits, unless
	// Options.TwoPhaseOnly (onephase.go).
	onePhase storage.OnePhaser
	// awaitOnePhase, with index, is the store's wait for a one-phase
	// commit of a row in flight, which a read the index answers makes
	// first (as the store's own reads do).
	awaitOnePhase onePhaseAwaiter
	// epochStamp is set on a server's store that takes a commit point's
	// timestamp itself (epoch.go, stampsCommits); noEpochStamp once it
	// answered ErrNoOnePhase (an older server): later commits do not ask.
	epochStamp   storage.EpochStamper
	noEpochStamp atomic.Bool
	// fresh is set on a server's store that reads at a timestamp it
	// takes (storage.FreshReader): a transaction begun with BeginDeferred
	// takes its start timestamp with its first read; noFresh once the
	// store answered ErrNoOnePhase (an older server).
	fresh   storage.FreshReader
	noFresh atomic.Bool
	// noOnePhase is set once the store answered ErrNoOnePhase (no oracle
	// attached to it): later commits do not ask again.
	noOnePhase atomic.Bool
	// async is set on a store that takes async prewrites when
	// Options.AsyncCommit is on (async.go); noAsync once it answered
	// ErrNoOnePhase. background counts the async commits' record writes
	// still running (Close waits for them).
	async      storage.AsyncPrewriter
	noAsync    atomic.Bool
	background sync.WaitGroup
	oracle     Oracle
	live       coord.Liveness
	opts       Options
	// index is nil unless this process owns the store exclusively;
	// unhook removes the store's ApplyHook that keeps it.
	index  *cellIndex
	unhook func()
	// stable, with index, is the newest commit_ts this client
	// acknowledged or returned: read-only snapshots start above it
	// (stable.go).
	stable stableTS
	// observers is the registry of observed columns (SetObservers); nil
	// observes nothing.
	observers Observers
	// cond is set with index when the store can ask the index under the
	// row latch: a predicate the index decides is then never read.
	cond  storage.Conditioned
	stats stats
	// safePoints caches the garbage collector's safe point, which every
	// read checks after it returns (safepoint.go).
	safePoints safePoints
	// active counts the transactions begun and not yet ended, by start_ts:
	// the oldest holds the safe point back (OldestActive).
	active activeSet
	// gc is the garbage collector's state in this process (collector.go).
	gc gcState

	// Test knobs.
	crash          func(point string) bool                    // true stops a commit there
	sleep          func(context.Context, time.Duration) error // backoff wait
	secondaryBatch int                                        // rows per secondary commit call
}

// NewClient returns a Client. When store is Exclusive and an ApplyHooker,
// the client keeps the lock index and latest-commit cache in memory,
// rebuilding the lock index from the lock keyspace now.
func NewClient(ctx context.Context, store storage.Store, oracle Oracle, live coord.Liveness, opts Options) (*Client, error) {
	if opts.Owner == "" {
		opts.Owner = coord.NewOwnerID()
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Client{store: store, oracle: oracle, live: live, opts: opts, sleep: ctxwait.Sleep, secondaryBatch: 256}
	c.batch, _ = store.(storage.Batcher)
	if ib, ok := store.(storage.IdempotentBatcher); ok {
		c.batch, c.batchIdem = idempotentBatcher{ib}, true
	}
	c.deferred, _ = store.(storage.Deferred)
	c.idem, _ = store.(storage.Idempotent)
	c.epoched, _ = store.(storage.Epoched)
	if c.epoched != nil {
		c.epochStamp, _ = store.(storage.EpochStamper)
	}
	c.fresh, _ = store.(storage.FreshReader)
	c.unlessed, _ = store.(storage.Unlessed)
	if !opts.TwoPhaseOnly {
		c.onePhase, _ = store.(storage.OnePhaser)
	}
	if !opts.TwoPhaseOnly && opts.AsyncCommit {
		c.async, _ = store.(storage.AsyncPrewriter)
	}
	c.notify = NotifySpace{store: store, apart: separateNotify(store), now: c.opts.Now}
	if err := c.buildIndex(ctx); err != nil {
		return nil, err
	}
	if c.index != nil {
		c.awaitOnePhase, _ = store.(onePhaseAwaiter)
	}
	return c, nil
}

// idempotentBatcher sends MutateRows through the variant without a nonce.
type idempotentBatcher struct{ b storage.IdempotentBatcher }

func (i idempotentBatcher) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return i.b.MutateRowsIdempotent(ctx, rows)
}

// Owns reports whether a client of store owns it: an exclusive store (an
// embedded one, every write of which passes through this process) with an
// apply hook, which the client then claims to keep its index (one client
// per such store).
func Owns(store storage.Store) bool {
	ex, ok := store.(storage.Exclusive)
	_, hooks := store.(storage.ApplyHooker)
	return ok && hooks && ex.Exclusive()
}

func (c *Client) buildIndex(ctx context.Context) error {
	if !Owns(c.store) {
		return nil
	}
	hk := c.store.(storage.ApplyHooker)
	ix := newCellIndex(c.opts.IndexShards, c.opts.indexCap)
	remove, err := hk.SetApplyHook(ix.apply)
	if err != nil {
		return fmt.Errorf("txn: %w: the store already has a client (one client per exclusive store: share the DB)", err)
	}
	all := storage.Filter{{Family: FamilyLock, AllQualifiers: true}}
	err = c.store.Scan(ctx, nil, nil, all, 0, func(r storage.Row) bool {
		for i := range r.Cells {
			m := storage.SetCell(FamilyLock, r.Cells[i].Qualifier, r.Cells[i].TS, nil)
			ix.applyLock(r.Key, &m)
		}
		return true
	})
	if err != nil {
		remove()
		return fmt.Errorf("txn: rebuilding lock index: %w", err)
	}
	c.index, c.unhook = ix, remove
	c.cond, _ = c.store.(storage.Conditioned)
	return nil
}

// Indexed reports whether the client owns its store exclusively (and keeps
// the in-memory index through its apply hook).
func (c *Client) Indexed() bool { return c.index != nil }

// Owner returns the identity this client writes into its locks.
func (c *Client) Owner() string { return c.opts.Owner }

// Close detaches the client from the store (removes the ApplyHook),
// once the commit records of its async commits still being written are
// (each bounded by asyncRecordsTimeout). It does not close the store.
func (c *Client) Close() {
	c.background.Wait()
	if c.unhook != nil {
		c.unhook()
	}
}

// Stats counts protocol events since the client was created.
type Stats struct {
	Commits, Conflicts, Aborts  uint64
	RolledForward, RolledBack   uint64
	LockWaits, PrewriteResolved uint64
	// Pushes counts the reads that pushed a transaction's commit
	// timestamp and read past its lock; Repushed the commit points that
	// a push refused, sent again at a newer commit timestamp.
	Pushes, Repushed uint64
	// OnePhase counts the commits made in one call (among Commits).
	OnePhase uint64
	// Async counts the async commits (among Commits), AsyncResolved the
	// async locks whose transaction this client decided from all its
	// rows (committed, or rolled back after it left a rollback record
	// where a row held nothing), and AsyncReadPast the reads that read
	// past an async lock whose transaction commits above them, if at
	// all, without waiting.
	Async, AsyncResolved, AsyncReadPast uint64
}

type stats struct {
	commits, conflicts, aborts atomic.Uint64
	rolledForward, rolledBack  atomic.Uint64
	lockWaits, prewriteResolve atomic.Uint64
	pushes, repushed           atomic.Uint64
	onePhase                   atomic.Uint64
	async, asyncResolved       atomic.Uint64
	asyncReadPast              atomic.Uint64
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Commits: s.commits.Load(), Conflicts: s.conflicts.Load(), Aborts: s.aborts.Load(),
		RolledForward: s.rolledForward.Load(), RolledBack: s.rolledBack.Load(),
		LockWaits: s.lockWaits.Load(), PrewriteResolved: s.prewriteResolve.Load(),
		Pushes: s.pushes.Load(), Repushed: s.repushed.Load(),
		OnePhase: s.onePhase.Load(),
		Async:    s.async.Load(), AsyncResolved: s.asyncResolved.Load(), AsyncReadPast: s.asyncReadPast.Load(),
	}
}

// Backoff returns the jittered exponential delay before retry attempt n
// (0-based): from about 1ms doubling to about 100ms, jittered by
// Options.Rand.
func (c *Client) Backoff(n int) time.Duration {
	d := time.Millisecond << min(n, 7)
	return d/2 + time.Duration(c.opts.Rand(int64(d)))
}

func (c *Client) backoff(ctx context.Context, attempt int) error {
	return c.sleep(ctx, c.Backoff(attempt))
}

// operation marks ctx as one operation of the client (Options.Operation).
func (c *Client) operation(ctx context.Context) context.Context {
	if c.opts.Operation == nil {
		return ctx
	}
	return c.opts.Operation(ctx)
}

// detach returns a context for work that must go on after ctx ends (a
// rollback, a commit point): not ended by ctx's end, but CleanupTimeout
// after it, so that a cancelled caller waits a bounded time whatever the
// store does. It keeps ctx's values. Call the CancelFunc when done.
func (c *Client) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		// ctx never ends (context.Background, or one without cancel):
		// nothing to outlive, and no timer to arm.
		return context.WithCancel(ctx)
	}
	dctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(c.opts.CleanupTimeout, func() {
			cancel(fmt.Errorf("txn: cleanup cut short %v after its caller's context ended (%w)", c.opts.CleanupTimeout, context.Cause(ctx)))
		})
	})
	return dctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(nil)
	}
}

func (c *Client) crashed(point string) bool {
	return c.crash != nil && c.crash(point)
}

func (c *Client) nowMS() uint64 { return uint64(c.opts.Now().UnixMilli()) }

// retryable reports whether a failed storage call may be re-sent.
func retryable(err error) bool {
	return !errors.Is(err, storage.ErrInvalidArgument) && !errors.Is(err, storage.ErrClosed) &&
		!errors.Is(err, storage.ErrFailed) && !errors.Is(err, storage.ErrInUse) &&
		!errors.Is(err, storage.ErrEpochChanged) && !errors.Is(err, storage.ErrNoOnePhase) &&
		!errors.Is(err, storage.ErrObserversMoved) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// cas sends a CheckAndMutate that the protocol makes safe to apply twice
// in any order (each caller says why), re-sending it on error: through
// storage.Idempotent, without a nonce, where the store offers it.
func (c *Client) cas(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if c.idem != nil {
		return c.resendCAS(func() (bool, error) { return c.idem.CheckAndMutateIdempotent(ctx, row, pred, ifTrue, ifFalse) })
	}
	return c.resendCAS(func() (bool, error) { return c.store.CheckAndMutate(ctx, row, pred, ifTrue, ifFalse) })
}

// casDeferred is cas through the store's deferred variant when it has one.
func (c *Client) casDeferred(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if c.deferred == nil {
		return c.cas(ctx, row, pred, ifTrue, ifFalse)
	}
	return c.resendCAS(func() (bool, error) { return c.deferred.CheckAndMutateDeferred(ctx, row, pred, ifTrue, ifFalse) })
}

// casIndexed is cas (deferred when asked) on the predicate full, which
// the index may decide: under the row latch the store asks cond, and reads
// rest only if cond is undecided. Without that capability the store reads
// full. cond, when undecided, must leave rest equivalent to full.
func (c *Client) casIndexed(ctx context.Context, row []byte, cond storage.Cond, rest, full storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	switch {
	case c.cond == nil && deferred:
		return c.casDeferred(ctx, row, full, ifTrue, ifFalse)
	case c.cond == nil:
		return c.cas(ctx, row, full, ifTrue, ifFalse)
	}
	return c.resendCAS(func() (bool, error) {
		return c.cond.CheckAndMutateCond(ctx, row, cond, rest, ifTrue, ifFalse, deferred)
	})
}

// resendCAS sends an idempotent conditional write, re-sending it on a
// retryable error at most StoreRetries more times.
func (c *Client) resendCAS(send func() (bool, error)) (bool, error) {
	var err error
	for i := 0; i <= c.opts.StoreRetries; i++ {
		var matched bool
		if matched, err = send(); err == nil || !retryable(err) {
			return matched, err
		}
	}
	return false, err
}

// mutate sends a Mutate that is safe to apply twice in any order (each
// caller says why), re-sending it on error. Over a server it carries a
// nonce anyway (a Mutate always does); Bigtable's client may re-send it.
func (c *Client) mutate(ctx context.Context, row []byte, muts ...storage.Mutation) error {
	var err error
	for i := 0; i <= c.opts.StoreRetries; i++ {
		if err = c.store.Mutate(ctx, row, muts...); err == nil || !retryable(err) {
			return err
		}
	}
	return err
}

// read sends a ReadRow, re-sending it on error.
func (c *Client) read(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	var (
		r   storage.Row
		err error
	)
	for i := 0; i <= c.opts.StoreRetries; i++ {
		if r, err = c.store.ReadRow(ctx, row, f); err == nil || !retryable(err) {
			return r, err
		}
	}
	return r, err
}
