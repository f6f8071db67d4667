package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/heapfloor"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/statuspage"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/server"
)

// drainTimeout bounds how long serve waits for calls in flight at SIGTERM.
const drainTimeout = 30 * time.Second

// heapFloor is the heap size below which serve's garbage collector does
// not start a cycle (internal/heapfloor), unless GOGC is set: the
// server's live Go heap is a few MiB (built with cgo, pebble keeps its
// memtables and cache outside it), and at the runtime's own floor of
// 4 MiB it collected about 150 times in 20000 ReadRows (BenchmarkRPC),
// 14% of the CPU. At most this much more memory holds garbage between
// cycles.
const heapFloor = 64 << 20

// serveConfig is what `serve` was asked for.
type serveConfig struct {
	dir         string
	listen      cli.ListenFlags
	http        cli.HTTPFlags
	log         cli.LogFlags
	opts        server.Options
	checkLimits func() error
	profile     string
}

// maxSyncDelay is the longest group-commit wait the store takes
// (pebble.Options.SyncDelay).
const maxSyncDelay = 10 * time.Millisecond

// serveCmd is `serve`: one process hosting the store, the timestamp
// oracle and the lock service over gRPC (server package). Beyond loopback
// it needs a token, and TLS (or --insecure, which its log warns about):
// without TLS the token crosses the network in clear.
func serveCmd() *cobra.Command {
	var cfg serveConfig
	c := &cobra.Command{
		Use:   "serve",
		Short: "serve a database (store, oracle, lock service) over gRPC to many processes",
		Long: `Serve a database directory (the embedded layout, so a --dir database can be
served) to many processes over gRPC: the store, the timestamp oracle and the
lock service. SIGTERM or SIGINT drains the calls in flight and exits 0.
With --http, serve a status page for operators at / (observers, backlog,
sessions, store size, charts of the last hour) and Prometheus metrics at
/metrics; see docs/status-page.md. Unless GOGC is set, the garbage collector
lets the heap reach 64 MiB before it collects (its live heap is a few MiB).`,
		Example: `  percolator serve --dir D
  percolator serve --dir D --listen :7420 --token-file tok --tls-cert cert.pem --tls-key key.pem --http :7421`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return cfg.run(c.Context(), c.ErrOrStderr()) },
	}
	fs := c.Flags()
	fs.StringVar(&cfg.dir, "dir", "", "database directory (created if needed; the embedded layout, so a --dir database can be served)")
	cfg.http.Register(fs, cli.BeyondListen)
	cfg.listen.Register(fs, "127.0.0.1:7420", "read and write the whole store")
	cfg.checkLimits = limitFlags(fs, &cfg.opts)
	cli.RegisterGCLifetime(fs, &cfg.opts.GCLifetime)
	cli.RegisterDiskReserve(fs, &cfg.opts.DiskReserve)
	fs.DurationVar(&cfg.opts.SyncDelay, "sync-delay", 0, "group commit: after a log sync that many concurrent commits shared, wait this long before the next so more share it (0: 100µs; negative: never wait; at most 10ms)")
	cfg.log.Register(fs)
	fs.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	_ = fs.MarkHidden("cpuprofile") // a developer's tool, as bench's
	return c
}

// validate checks the flags and reads the token and TLS key pair.
func (cfg *serveConfig) validate() error {
	if cfg.dir == "" {
		return cli.Usagef("--dir is required")
	}
	if err := cfg.log.Validate(); err != nil {
		return err
	}
	if err := cfg.checkLimits(); err != nil {
		return err
	}
	if cfg.opts.GCLifetime < 0 {
		return cli.Usagef("--gc-lifetime must be positive, or 0 to turn the background collector off")
	}
	if cfg.opts.SyncDelay > maxSyncDelay {
		return cli.Usagef("--sync-delay %v: at most %v (negative: never wait)", cfg.opts.SyncDelay, maxSyncDelay)
	}
	if err := cfg.listen.Check(); err != nil {
		return err
	}
	return cfg.listen.CheckHTTP(&cfg.http)
}

func (cfg *serveConfig) run(ctx context.Context, stderr io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		floor := heapfloor.Start(heapFloor, heapfloor.Interval)
		defer floor.Stop()
	}
	stopProfile, err := startCPUProfile(cfg.profile)
	if err != nil {
		return err
	}
	defer stopProfile()
	log, token := cfg.log.Logger(stderr), cfg.listen.Token
	opts := cfg.opts
	opts.DisableGC = opts.GCLifetime == 0
	opts.Dir, opts.Token, opts.Logger, opts.TLS = cfg.dir, token, log, cfg.listen.TLS
	lis, err := net.Listen("tcp", cfg.listen.Addr)
	if err != nil {
		return cli.ListenError("--listen", cfg.listen.Addr, err)
	}
	opts.RegistryVersion = observer.StoredVersion // each commit timestamp carries the registry re-read
	srv, err := server.Open(ctx, opts)
	if err != nil {
		_ = lis.Close()
		return err
	}
	serveCtx := ctx
	if cfg.http.Addr != "" {
		stop, err := cfg.startHTTP(ctx, srv, lis.Addr(), log)
		if err != nil {
			_ = lis.Close()
			srv.Kill()
			return err
		}
		defer stop()
		var cancel context.CancelFunc
		serveCtx, cancel = stopBeforeDrain(ctx, stop)
		defer cancel()
	}
	if cfg.listen.Beyond && opts.TLS == nil {
		log.Warn("serving beyond loopback without TLS (--insecure): the token and every request and reply cross the network in clear; "+
			"anyone who can see the traffic can take the token and read and write the whole store", "addr", lis.Addr().String())
	}
	log.Info("serving", "addr", lis.Addr().String(), "dir", cfg.dir, "tls", opts.TLS != nil, "token", token != "")
	if err := srv.ServeUntil(serveCtx, lis, drainTimeout); err != nil {
		return err // the store failed, or the drain did
	}
	return cli.ErrDrained
}

// startHTTP serves the status page and the server's metrics on --http.
func (cfg *serveConfig) startHTTP(ctx context.Context, srv *server.Server, lis net.Addr, log *slog.Logger) (stop func(), err error) {
	r := newServeReader(srv, cfg.dir, lis, &cfg.listen)
	h := statusHTTP{flags: &cfg.http, token: cfg.listen.Token, tls: cfg.listen.TLS, metrics: srv.MetricsHandler(), log: log,
		page: statuspage.Options{Process: "serve", About: cfg.dir + " on " + lis.String(), Read: r.read}}
	return h.start(ctx, r.close)
}

// stopBeforeDrain is ctx for ServeUntil, ended only once stop has run
// after ctx ended: the status page's own client leaves before the server
// drains, so the drain does not wait for it.
func stopBeforeDrain(ctx context.Context, stop func()) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
			stop()
			cancel(context.Cause(ctx))
		case <-sctx.Done():
		}
	}()
	return sctx, func() { cancel(nil) }
}

// limitFlags registers serve's --max-* flags, which set opts's limits
// (their defaults the server's), and returns the check of their values.
func limitFlags(fs *pflag.FlagSet, opts *server.Options) (check func() error) {
	limits := []struct {
		field *int
		name  string
		def   int
		help  string
	}{
		{&opts.MaxSessions, "max-sessions", server.DefaultMaxSessions, "live liveness sessions of all clients (each client process holds one)"},
		{&opts.MaxSessionsPerOwner, "max-sessions-per-owner", server.DefaultMaxSessionsPerOwner, "live sessions of one owner (one client process)"},
		{&opts.MaxLocks, "max-locks", server.DefaultMaxLocks, "advisory locks held by all sessions"},
		{&opts.MaxLocksPerSession, "max-locks-per-session", server.DefaultMaxLocksPerSession, "advisory locks one session holds (an observer scanner holds one at a time)"},
		{&opts.MaxNonceGroups, "max-nonce-groups", server.DefaultMaxNonceGroups, "nonce groups known (one per database a client process opens, each kept 30 minutes after its last call)"},
		{&opts.MaxNonceCalls, "max-nonce-calls", server.DefaultMaxNonceCalls, "calls the nonce table holds for all clients"},
		{&opts.MaxNonceCallsPerGroup, "max-nonce-calls-per-group", server.DefaultMaxNonceCallsPerGroup, "calls the nonce table holds for one client (about its calls in flight)"},
	}
	for _, l := range limits {
		fs.IntVar(l.field, l.name, l.def, "at most this many "+l.help+"; a client past it is refused, what is held goes on; negative: no limit")
	}
	return func() error {
		for _, l := range limits {
			if *l.field == 0 {
				return cli.Usagef("--%s must be at least 1 (negative: no limit)", l.name)
			}
		}
		return nil
	}
}
