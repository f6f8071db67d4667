// Package cluster opens a percolator database on the distributed
// deployment: Cloud Bigtable as the store (storage/bigtable) and etcd as
// the coordination service (coord/etcd: liveness sessions, advisory
// locks; oracle/etcd: the elected timestamp oracle). It wires those
// backends into percolator.Options, so that a program embedding
// percolator on a directory or a server does not link the Bigtable and
// etcd clients.
//
// Timestamps come from `percolator oracle` processes (run two or more; one
// leads, found through etcd). The DB's liveness is an etcd session: its
// owner is alive while the session's lease is, a commit checks the session
// just before its commit point, and the scanners take their advisory row
// locks in etcd.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/oracle"
	oracleetcd "github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// Options configures Open.
type Options struct {
	// Bigtable names the table (created with `percolator init --bigtable`
	// or bigtable.Init).
	Bigtable bigtable.Options
	// Etcd lists the etcd endpoints. Required.
	Etcd []string
	// Prefix is the root of percolator's etcd keys. Default
	// etcd.DefaultPrefix.
	Prefix string
	// SessionTTL is the etcd lease of this DB's liveness. Default
	// etcd.DefaultTTL.
	SessionTTL time.Duration
	// OracleToken and OracleCAFile reach oracles run with a token or TLS.
	OracleToken, OracleCAFile string
	// RunGC makes the DB run the garbage collector in the background
	// (DB.RunGC) until Close, with DB.GCLifetime: what the workers do.
	RunGC bool
	// DB holds the remaining database options (LockTTL, MaxRetries,
	// Logger, ...). Its Dir, Server, Store, Oracle, Liveness and Owner
	// must be empty: Open sets them.
	DB percolator.Options
}

// DB is a percolator.DB on Bigtable and etcd. Its Close also closes the
// clients Open made (the session first, so the process is seen dead at
// once).
type DB struct {
	*percolator.DB
	session *etcd.Session
	etcd    *clientv3.Client
}

// Session is the DB's etcd session (its liveness, and the membership of
// its workers).
func (db *DB) Session() *etcd.Session { return db.session }

// Etcd is the DB's etcd client.
func (db *DB) Etcd() *clientv3.Client { return db.etcd }

// ParseEndpoints splits a comma-separated endpoint list.
func ParseEndpoints(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Dial connects to etcd, waiting up to rpc.DefaultRetryBudget for it to
// answer (DialBudget).
func Dial(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	return DialBudget(ctx, endpoints, rpc.DefaultRetryBudget)
}

// attemptTimeout bounds one call to etcd while opening: etcd's client
// waits for a connection as long as the context allows.
const attemptTimeout = 5 * time.Second

// DialBudget connects to etcd. An etcd that does not answer (down,
// restarting, unreachable) is tried again, with back-off, for budget; then
// the error matches percolator.ErrUnavailable and names the endpoints.
func DialBudget(ctx context.Context, endpoints []string, budget time.Duration) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", percolator.ErrInvalidArgument)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: attemptTimeout, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	// The client dials lazily: fail now, naming the endpoints, rather
	// than in the first transaction.
	err = retryOpening(ctx, budget, func(ctx context.Context) error {
		_, err := cli.Status(ctx, endpoints[0])
		return err
	})
	if err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("%w: etcd %s: %v", percolator.ErrUnavailable, strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// retryOpening calls fn, each attempt bounded by attemptTimeout, until it
// succeeds, fails with an invalid argument, ctx ends or budget (counted
// from the call) has passed; it returns the last error.
func retryOpening(ctx context.Context, budget time.Duration, fn func(context.Context) error) error {
	deadline := time.Now().Add(budget)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		attempt := time.Now().Add(attemptTimeout)
		if deadline.Before(attempt) {
			attempt = deadline
		}
		actx, cancel := context.WithDeadline(ctx, attempt)
		err := fn(actx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return errors.Join(err, ctx.Err())
		case errors.Is(err, etcd.ErrInvalidArgument), errors.Is(err, percolator.ErrInvalidArgument):
			return err
		case !time.Now().Add(wait).Before(deadline):
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// Open opens the database.
func Open(ctx context.Context, opts Options) (*DB, error) {
	o := opts.DB
	if o.Dir != "" || o.Server != "" || o.Store != nil || o.Oracle != nil || o.Liveness != nil || o.Owner != "" {
		return nil, fmt.Errorf("%w: cluster.Open sets Dir, Server, Store, Oracle, Liveness and Owner itself", percolator.ErrInvalidArgument)
	}
	var closers []io.Closer
	fail := func(err error) (*DB, error) {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
		return nil, err
	}
	budget := o.RetryBudget
	if budget == 0 {
		budget = rpc.DefaultRetryBudget
	}
	began := time.Now()
	bto := opts.Bigtable
	if bto.OpenBudget == 0 {
		bto.OpenBudget = budget
	}
	st, err := bigtable.Open(ctx, bto)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, st)
	cli, err := DialBudget(ctx, opts.Etcd, budget)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cli)
	owner := coord.NewOwnerID()
	var sess *etcd.Session
	err = retryOpening(ctx, max(budget-time.Since(began), time.Nanosecond), func(ctx context.Context) error {
		var err error
		sess, err = etcd.Open(ctx, cli, etcd.SessionOptions{Owner: owner, TTL: opts.SessionTTL, Prefix: opts.Prefix, Logger: o.Logger})
		return err
	})
	switch {
	case errors.Is(err, etcd.ErrInvalidArgument):
		return fail(fmt.Errorf("%w: %w", percolator.ErrInvalidArgument, err))
	case err != nil:
		return fail(fmt.Errorf("%w: etcd %s: %w", percolator.ErrUnavailable, strings.Join(opts.Etcd, ","), err))
	}
	closers = append(closers, sess)
	backend, err := oracleetcd.NewOracleBackend(cli, oracleetcd.OracleBackendOptions{
		Prefix: opts.Prefix, Logger: o.Logger,
		Dial: rpc.DialOptions{Token: opts.OracleToken, CAFile: opts.OracleCAFile},
	})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, backend)
	o.Store, o.Oracle, o.Liveness, o.Owner = st, oracle.NewClient(backend), sess, owner
	gc := &gcRun{}
	if opts.RunGC {
		closers = append(closers, gc) // closed after the DB: first of these
	}
	o.Closers = append(closers, o.Closers...)
	pdb, err := percolator.Open(ctx, o) // owns the closers from here
	if err != nil {
		return nil, err
	}
	db := &DB{DB: pdb, session: sess, etcd: cli}
	if opts.RunGC {
		gc.start(db)
	}
	return db, nil
}

// gcRun is a DB's background collector (Options.RunGC), stopped by Close.
type gcRun struct {
	stop context.CancelFunc
	done chan struct{}
}

func (g *gcRun) start(db *DB) {
	ctx, stop := context.WithCancel(context.Background())
	g.stop, g.done = stop, make(chan struct{})
	go func() { defer close(g.done); _ = db.RunGC(ctx) }()
}

func (g *gcRun) Close() error {
	if g.stop != nil {
		g.stop()
		<-g.done
	}
	return nil
}

// Upgrade moves the Bigtable store to percolator.FormatVersion and returns
// the format it was of (percolator.Upgrade). It refuses, changing
// nothing, while any process has a live session in etcd under the prefix:
// a process of the old format would go on writing without the new
// format's checks. It checks again after recording the new format and
// reports a process that registered meanwhile (it opened the store while
// it was of the old format: stop it).
func Upgrade(ctx context.Context, opts Options) (from uint64, err error) {
	budget := opts.DB.RetryBudget
	if budget == 0 {
		budget = rpc.DefaultRetryBudget
	}
	cli, err := DialBudget(ctx, opts.Etcd, budget)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	live := func() error {
		owners, err := etcd.LiveOwners(ctx, cli, opts.Prefix)
		if err != nil {
			return fmt.Errorf("%w: %w", percolator.ErrUnavailable, err)
		}
		if len(owners) > 0 {
			return fmt.Errorf("%w: %d process(es) are registered on the deployment (%s): stop them first; an upgrade runs alone", percolator.ErrInUse, len(owners), strings.Join(owners[:min(len(owners), 5)], ", "))
		}
		return nil
	}
	if err := live(); err != nil {
		return 0, err
	}
	bto := opts.Bigtable
	if bto.OpenBudget == 0 {
		bto.OpenBudget = budget
	}
	st, err := bigtable.Open(ctx, bto)
	if err != nil {
		return 0, err
	}
	o := opts.DB
	o.Store = st
	from, err = percolator.Upgrade(ctx, o)
	err = errors.Join(err, st.Close())
	if err != nil {
		return from, err
	}
	if err := live(); err != nil {
		return from, fmt.Errorf("the store was upgraded from format %d to %d, and a process registered meanwhile: if it is of format %d, stop it: %w", from, percolator.FormatVersion, from, err)
	}
	return from, nil
}

// gcLock is the advisory lock (in etcd) the proposing worker holds.
const gcLock = "percolator/gc"

// gcGroup is the etcd membership group of the processes that collect.
const gcGroup = "gc"

// RunGC runs the garbage collector until ctx ends (percolator.DB.RunGC):
// every process that runs it samples the oracle and joins the membership
// group gcGroup in etcd; the one holding the advisory lock gcLock proposes
// safe points (another takes over when its session ends), held at or
// below the oldest start_ts the live sessions publish; each member
// collects its share of every pass (the rows whose hash modulo the
// members' number is its index in the sorted member list), resuming its
// share from the cursor it saved after a crash. While the member list is
// unknown (joining, an etcd outage), a process collects every row: safe,
// only wasteful.
func (db *DB) RunGC(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var members atomic.Pointer[[]coord.Member]
	done := make(chan struct{})
	go func() { defer close(done); db.followGCMembers(ctx, &members) }()
	defer func() { cancel(); <-done }()
	var unlock func()
	release := func() {
		if unlock != nil {
			unlock()
			unlock = nil
		}
	}
	defer release()
	return db.DB.RunGC(ctx, percolator.GCRole{
		MayPropose: func(ctx context.Context) bool {
			// Taken afresh each time: a lock lost with a lease is not
			// trusted, and the holder takes it back at once.
			release()
			if db.session.Check() != nil {
				return false
			}
			u, held, err := db.session.TryLock(ctx, gcLock, db.session.Owner())
			if err != nil || held {
				return false
			}
			unlock = u
			return true
		},
		Share: func() (int, int) { return gcShare(members.Load(), db.session.Owner()) },
	})
}

// gcShare is owner's share in list: its index and the list's length, or
// every row (0 of 1) when the list is unknown or does not name it.
func gcShare(list *[]coord.Member, owner string) (int, int) {
	if list != nil {
		for i, m := range *list {
			if m.Owner == owner {
				return i, len(*list)
			}
		}
	}
	return 0, 1
}

// followGCMembers registers this process in gcGroup and keeps members
// the group's current list (nil while unknown) until ctx ends, joining
// again after a watch ends (an etcd outage).
func (db *DB) followGCMembers(ctx context.Context, members *atomic.Pointer[[]coord.Member]) {
	m := db.session.Membership()
	for ctx.Err() == nil {
		switch err := m.Register(ctx, gcGroup, db.session.Owner()); {
		case errors.Is(err, coord.ErrNotAlive):
			return // this session ended: the DB is done
		case err == nil:
			for list := range m.WatchMembers(ctx, gcGroup) {
				members.Store(&list)
			}
		}
		members.Store(nil)
		_ = ctxwait.Sleep(ctx, time.Second)
	}
}
