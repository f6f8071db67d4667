package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// Target is where a command's database is: an embedded store (--dir), a
// server (--server, with its token and CA), or Bigtable with etcd
// (--bigtable, --etcd). Its flags are defined once, by Register.
type Target struct {
	Dir, Server, TokenFile, TLSCA string
	Bigtable, Etcd, EtcdPrefix    string
	// SessionTTL is the lease of the process's liveness session with the
	// server or etcd; 0 for the default.
	SessionTTL time.Duration
	// RetryBudget is how long an operation retries a server that does
	// not answer (percolator.Options.RetryBudget); 0 for the default.
	RetryBudget time.Duration
	// LockTTL is how long the process's locks stay valid without a
	// heartbeat (percolator.Options.LockTTL); 0 for the default.
	LockTTL time.Duration
	// ReadThroughLocks makes this process's reads push a live
	// transaction's commit timestamp past their snapshot rather than wait
	// for its lock (percolator.Options.ReadThroughLocks).
	ReadThroughLocks bool
	// TwoPhaseOnly commits every transaction of this process in two
	// phases (percolator.Options.TwoPhaseOnly).
	TwoPhaseOnly bool
	// AsyncCommit commits this process's small multi-row transactions
	// asynchronously (percolator.Options.AsyncCommit).
	AsyncCommit bool
	// GCLifetime is the garbage collector's lifetime (--gc-lifetime); 0
	// turns the background collector off.
	GCLifetime time.Duration
	// DiskReserve is the disk space an embedded store keeps for garbage
	// collection (--disk-reserve; percolator.Options.DiskReserve).
	DiskReserve int64
	// NoBackgroundGC keeps the DB's background collector off whatever
	// --gc-lifetime says: `percolator gc`, which runs its own pass, whose
	// count a background pass at the same safe point would otherwise
	// take.
	NoBackgroundGC bool
	// RunGC, on Bigtable, makes the DB run the garbage collector in the
	// background (cluster.Options.RunGC) unless --gc-lifetime is 0: the
	// workers' part.
	RunGC bool
	// Now, if set, is the wall clock the DB judges locks' TTLs by
	// (percolator.Options.Now): no flag, percolator verify's clients set it.
	Now func() time.Time
}

// Register adds the target flags to fs: --dir (described by dirUsage),
// --server, --token-file, --tls-ca, --retry-budget, --lock-ttl and the
// cluster's.
func (t *Target) Register(fs *pflag.FlagSet, dirUsage string) {
	fs.StringVar(&t.Dir, "dir", "", dirUsage)
	fs.StringVar(&t.Server, "server", "", "address of a percolator server (percolator serve), instead of --dir")
	fs.StringVar(&t.TokenFile, "token-file", "", "file holding the server's token (default: $PERCOLATOR_TOKEN)")
	fs.StringVar(&t.TLSCA, "tls-ca", "", "CA certificate (PEM) to verify the server's TLS certificate with")
	fs.DurationVar(&t.RetryBudget, "retry-budget", 0, "with --server: how long an operation (a transaction, a read, opening) goes on retrying a server that does not answer before the command fails naming it; with --etcd: how long opening waits for etcd (default 30s)")
	RegisterGCLifetime(fs, &t.GCLifetime)
	RegisterDiskReserve(fs, &t.DiskReserve)
	fs.DurationVar(&t.LockTTL, "lock-ttl", 0, "how long this process's transaction locks stay valid without its heartbeat: another process may resolve a lock once its owner is seen dead (--session-ttl) or once this has passed, whichever comes first; at least 1ms (default 10s)")
	fs.BoolVar(&t.TwoPhaseOnly, "two-phase-only", false, "commit every transaction in two phases (by default a transaction that writes one row commits in one call, embedded and over a server)")
	fs.BoolVar(&t.AsyncCommit, "async-commit", false, "commit a small transaction that writes several rows (at most 256 cells) as soon as its prewrites are in, in one call, embedded and over a server: its commit records follow in the background; every process on the store must be of a build that knows async commit")
	fs.BoolVar(&t.ReadThroughLocks, "read-through-locks", false, "a read that meets the lock of a live transaction older than its snapshot pushes that transaction's commit timestamp past the snapshot and reads past the lock, instead of waiting for it (writers still wait)")
	t.registerCluster(fs)
}

// registerCluster adds --bigtable, --etcd, --etcd-prefix and
// --session-ttl to fs.
func (t *Target) registerCluster(fs *pflag.FlagSet) {
	fs.StringVar(&t.Bigtable, "bigtable", "", "Cloud Bigtable table PROJECT/INSTANCE/TABLE (with --etcd), instead of --dir (BIGTABLE_EMULATOR_HOST is honoured)")
	fs.StringVar(&t.Etcd, "etcd", "", "etcd endpoints, comma-separated (with --bigtable): liveness, advisory locks, and the elected oracle (percolator oracle)")
	fs.StringVar(&t.EtcdPrefix, "etcd-prefix", "", "root of percolator's etcd keys (default percolator/)")
	fs.DurationVar(&t.SessionTTL, "session-ttl", 0, "lease of this process's liveness session with --server or --etcd: stopped, it is seen dead and its locks resolved about this long after; with --etcd whole seconds, at least 2s (default 10s)")
}

// Validate requires exactly one of --dir, --server and --bigtable (with
// --etcd), and checks the flags that go with them.
func (t *Target) Validate() error {
	n := 0
	for _, s := range []string{t.Dir, t.Server, t.Bigtable} {
		if s != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return Usagef("--dir, --server and --bigtable exclude each other")
	case n == 0:
		return Usagef("--dir, --server or --bigtable is required")
	case t.Dir != "" && (t.TokenFile != "" || t.TLSCA != ""):
		return Usagef("--token-file and --tls-ca need --server or --bigtable")
	case t.RetryBudget < 0:
		return Usagef("--retry-budget must be positive")
	case t.GCLifetime < 0:
		return Usagef("--gc-lifetime must be positive, or 0 to turn the background collector off")
	case t.RetryBudget != 0 && t.Server == "" && t.Etcd == "":
		return Usagef("--retry-budget needs --server or --etcd")
	case (t.Bigtable == "") != (t.Etcd == ""):
		return Usagef("--bigtable and --etcd go together")
	case t.EtcdPrefix != "" && t.Etcd == "":
		return Usagef("--etcd-prefix needs --etcd")
	}
	return t.validateTTLs()
}

// validateTTLs refuses a --lock-ttl the database would, a --session-ttl
// the target's session would, and a --bigtable that names no table.
func (t *Target) validateTTLs() error {
	if t.LockTTL != 0 {
		if err := (&percolator.Options{LockTTL: t.LockTTL}).Validate(); err != nil {
			return Usagef("--lock-ttl %v: at least 1ms", t.LockTTL)
		}
	}
	if t.SessionTTL != 0 {
		if err := t.validateSessionTTL(); err != nil {
			return err
		}
	}
	if t.Bigtable != "" {
		var o bigtable.Options
		if err := o.ParseTable(t.Bigtable); err != nil {
			return Usagef("--bigtable: %v", err)
		}
	}
	return nil
}

// validateSessionTTL refuses a --session-ttl the target's session would:
// none on an embedded store, and etcd's leases are whole seconds of at
// least etcd.MinTTL (a server checks its own bounds).
func (t *Target) validateSessionTTL() error {
	switch {
	case t.Dir != "":
		return Usagef("--session-ttl needs --server or --etcd")
	case t.SessionTTL < 0:
		return Usagef("--session-ttl must be positive")
	case t.Etcd != "":
		o := etcd.SessionOptions{Owner: "-", TTL: t.SessionTTL}
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			return Usagef("--session-ttl: %v", err)
		}
	}
	return nil
}

// String names the target for messages: the flag to pass again.
func (t *Target) String() string {
	if t.Bigtable != "" {
		return "--bigtable " + t.Bigtable + " --etcd " + t.Etcd
	}
	if t.Server != "" {
		return "--server " + t.Server
	}
	return "--dir " + t.Dir
}

// PublishDir is where a long-running command publishes its status: the
// database directory, or nowhere for a server.
func (t *Target) PublishDir() string { return t.Dir }

// RegisterDiskReserve adds --disk-reserve to fs, into n.
func RegisterDiskReserve(fs *pflag.FlagSet, n *int64) {
	fs.Int64Var(n, "disk-reserve", pebble.DefaultDiskReserve, "with --dir (and serve): bytes of disk the store keeps for the garbage collector, which needs log space to free space; while less is free, writes fail with \"disk nearly full\" until collection frees enough; -1 keeps none")
}

// RegisterGCLifetime adds --gc-lifetime to fs, into d.
func RegisterGCLifetime(fs *pflag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "gc-lifetime", txn.DefaultGCLifetime, "how long a snapshot stays readable: the garbage collector this process runs (embedded store, server; on Bigtable, workers) removes only versions no younger snapshot reads; a transaction older than that fails its reads with snapshot too old unless it is still open; 0 turns background collection off")
}

// GCOptions are the database options --gc-lifetime sets.
func (t *Target) GCOptions() (lifetime time.Duration, disabled bool) {
	if t.GCLifetime == 0 {
		return 0, true
	}
	return t.GCLifetime, t.NoBackgroundGC
}

// ReadToken reads the token from file, or $PERCOLATOR_TOKEN if file is
// "".
func ReadToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("PERCOLATOR_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "", Rephrase(err, "--token-file %s: %v", file, pe.Err)
	}
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", file, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", file)
	}
	return tok, nil
}

// Open opens the target's database; create allows an embedded store to be
// created (index and bank), otherwise a directory without one fails.
func (t *Target) Open(ctx context.Context, create bool) (*percolator.DB, error) {
	switch {
	case t.Bigtable != "":
		return t.openCluster(ctx)
	case t.Server != "":
		return t.openServer(ctx)
	}
	life, off := t.GCOptions()
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.Dir, MustExist: !create, LockTTL: t.LockTTL, ReadThroughLocks: t.ReadThroughLocks, TwoPhaseOnly: t.TwoPhaseOnly, AsyncCommit: t.AsyncCommit, Now: t.Now,
		GCLifetime: life, DisableGC: off, DiskReserve: t.DiskReserve})
	if errors.Is(err, pebble.ErrLocked) {
		return nil, inUse(err, t.Dir, create)
	}
	return db, err
}

// openServer opens the server's database (--server) with the token.
func (t *Target) openServer(ctx context.Context) (*percolator.DB, error) {
	tok, err := ReadToken(t.TokenFile)
	if err != nil {
		return nil, err
	}
	db, err := percolator.Open(ctx, percolator.Options{Server: t.Server, Token: tok, TLSCAFile: t.TLSCA, SessionTTL: t.SessionTTL,
		RetryBudget: t.RetryBudget, LockTTL: t.LockTTL, ReadThroughLocks: t.ReadThroughLocks, TwoPhaseOnly: t.TwoPhaseOnly, AsyncCommit: t.AsyncCommit, Now: t.Now})
	return db, t.tokenRefused(err, tok)
}

// tokenRefused says, of a server that refused the token tok, whether
// there was none or which one it refused; other errors pass unchanged.
func (t *Target) tokenRefused(err error, tok string) error {
	switch {
	case !errors.Is(err, percolator.ErrUnauthenticated):
		return err
	case tok == "":
		return Rephrase(err, "server %s wants a token, and none was given: pass --token-file FILE or set $PERCOLATOR_TOKEN", t.Server)
	case t.TokenFile != "":
		return Rephrase(err, "server %s refused the token in --token-file %s", t.Server, t.TokenFile)
	}
	return Rephrase(err, "server %s refused the token in $PERCOLATOR_TOKEN", t.Server)
}

// inUse adds to err, the refusal of the store in dir that another
// process holds, who that is when err could not say, and for a command
// that reads (create false) where to read what the holder publishes.
func inUse(err error, dir string, create bool) error {
	p, ok := runstatus.Running(dir)
	if !ok {
		return err
	}
	var le *pebble.LockedError
	if !errors.As(err, &le) || le.PID <= 0 {
		err = fmt.Errorf("%w: pid %d (%s)", err, p.PID, p.Command)
	}
	if create {
		return err
	}
	return fmt.Errorf("%w\n'percolator status --dir %s' shows what it is doing", err, dir)
}

// openCluster opens the database on Bigtable and etcd.
func (t *Target) openCluster(ctx context.Context) (*percolator.DB, error) {
	db, err := t.OpenCluster(ctx)
	if err != nil {
		return nil, err
	}
	return db.DB, nil
}

// OpenCluster opens the database on Bigtable and etcd (--bigtable).
func (t *Target) OpenCluster(ctx context.Context) (*cluster.DB, error) {
	tok, err := ReadToken(t.TokenFile)
	if err != nil {
		return nil, err
	}
	life, off := t.GCOptions()
	opts := cluster.Options{RunGC: t.RunGC && !off, Etcd: cluster.ParseEndpoints(t.Etcd), Prefix: t.EtcdPrefix, SessionTTL: t.SessionTTL, OracleToken: tok, OracleCAFile: t.TLSCA,
		DB: percolator.Options{RetryBudget: t.RetryBudget, LockTTL: t.LockTTL, ReadThroughLocks: t.ReadThroughLocks, TwoPhaseOnly: t.TwoPhaseOnly, AsyncCommit: t.AsyncCommit, Now: t.Now, GCLifetime: life}}
	if err := opts.Bigtable.ParseTable(t.Bigtable); err != nil {
		return nil, Usagef("--bigtable: %v", err)
	}
	return cluster.Open(ctx, opts)
}

// WithDB runs fn on the target's existing database (read commands).
func WithDB(ctx context.Context, t *Target, fn func(db *percolator.DB) error) error {
	db, err := t.Open(ctx, false)
	if err != nil {
		return err
	}
	return errors.Join(fn(db), db.Close())
}
