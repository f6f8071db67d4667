package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// Options configures Open.
type Options struct {
	// Dir is the database directory: the store lives in Dir/store, the
	// layout of the embedded DB (percolator.Options.Dir), so a directory
	// can be served that was used embedded, and back. Required.
	Dir string
	// FS, if set, holds the store instead of the OS filesystem (tests:
	// vfs.NewCrashableMem).
	FS vfs.FS
	// RegistryVersion, if set, reads the observer registry's version
	// from the store after each allocation, and every oracle reply
	// carries it, so a committer need not read the registry itself
	// (txn.VersionedOracle). Give observer.StoredVersion; `percolator
	// serve` does. Nil: replies carry no version, and each committer
	// reads the registry itself (one store read more per commit).
	RegistryVersion RegistryVersion
	// Token, if set, is required on every RPC (rpc.TokenHeader).
	Token string
	// TLS, if set, serves TLS.
	TLS *tls.Config
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// NonceGrace: how long a nonce group is kept after its last call.
	// Default 30 minutes.
	NonceGrace time.Duration
	// RestartGrace: how long after start an owner without a session is
	// reported alive (its session was lost with the server's memory and it
	// has not renewed yet): at least this, and at least the longest lease
	// any server of this store granted. Default 10s, the default session
	// lease.
	RestartGrace time.Duration
	// MaxMessageSize bounds a request or response. Default 64 MiB.
	MaxMessageSize int
	// FlushInterval: how often the nonce table's garbage is persisted and
	// expired sessions swept. Default 100ms.
	FlushInterval time.Duration

	// GCLifetime is the garbage collector's lifetime (txn.CollectorOptions):
	// a snapshot younger than this stays readable. Default 10 minutes.
	// The server collects its store in the background, holding the safe
	// point at or below the oldest start_ts its clients' sessions publish.
	GCLifetime time.Duration
	// DisableGC turns the background collector off.
	DisableGC bool
	// DiskReserve is the disk space, in bytes, the store keeps for garbage
	// collection: while less is free it refuses clients' writes
	// (percolator.ErrNoSpace) and the collector, which frees space, still
	// writes. 0 means 64 MiB; negative, none; at least two memtables.
	DiskReserve int64
	// MemTableSize is the store's memtable size in bytes (pebble keeps up
	// to two). 0 means 8 MiB.
	MemTableSize uint64
	// SyncDelay is the store's group-commit wait (pebble.Options.SyncDelay:
	// after a log sync, while syncs carry many commits, the log waits this
	// long before the next, so more share it). 0 means 100 µs; negative,
	// no wait; above 10 ms is an error.
	SyncDelay time.Duration

	// Limits on what clients hold open on the server (doc.go, "Limits").
	// A call that would pass one is refused with ResourceExhausted naming
	// the limit, the option and the serve flag that raise it, and changes
	// nothing; what is held keeps working, and closing it makes room.
	// 0 means the default (the Default* constants); negative means no
	// limit.
	//
	// MaxSessions bounds the live sessions of all clients,
	// MaxSessionsPerOwner those of one owner.
	MaxSessions, MaxSessionsPerOwner int
	// MaxLocks bounds the advisory locks held by all sessions,
	// MaxLocksPerSession those one session holds.
	MaxLocks, MaxLocksPerSession int
	// MaxNonceGroups bounds the nonce groups known; each is a synced write
	// kept NonceGrace after its last call.
	MaxNonceGroups int
	// MaxNonceCalls bounds the calls the nonce table holds for all groups,
	// MaxNonceCallsPerGroup those of one group: a group holds its calls at
	// or above its client's low-water mark, about the calls the client has
	// in flight.
	MaxNonceCalls, MaxNonceCallsPerGroup int
}

// The default limits: far above what a client process holds (one session,
// one nonce group and a few calls in flight, and an advisory lock per
// observer scanner at a time, for bank with many workers and index with
// workers alike), and low enough to bound the server's memory and its
// nonce records against a client that leaks them.
const (
	DefaultMaxSessions           = 10_000
	DefaultMaxSessionsPerOwner   = 64
	DefaultMaxLocks              = 100_000
	DefaultMaxLocksPerSession    = 10_000
	DefaultMaxNonceGroups        = 100_000
	DefaultMaxNonceCalls         = 1_000_000
	DefaultMaxNonceCallsPerGroup = 100_000
)

func (o *Options) ensureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.NonceGrace == 0 {
		o.NonceGrace = 30 * time.Minute
	}
	if o.RestartGrace == 0 {
		o.RestartGrace = 10 * time.Second
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 64 << 20
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.GCLifetime == 0 {
		o.GCLifetime = txn.DefaultGCLifetime
	}
	for _, l := range []struct {
		v   *int
		def int
	}{
		{&o.MaxSessions, DefaultMaxSessions}, {&o.MaxSessionsPerOwner, DefaultMaxSessionsPerOwner},
		{&o.MaxLocks, DefaultMaxLocks}, {&o.MaxLocksPerSession, DefaultMaxLocksPerSession},
		{&o.MaxNonceGroups, DefaultMaxNonceGroups}, {&o.MaxNonceCalls, DefaultMaxNonceCalls},
		{&o.MaxNonceCallsPerGroup, DefaultMaxNonceCallsPerGroup},
	} {
		if *l.v == 0 {
			*l.v = l.def
		}
	}
}

// limitError is a call refused by a limit of Options: ResourceExhausted,
// its message beginning with rpc.MsgLimit (the client's rpc.ErrLimit).
type limitError struct {
	what   string // what would pass the limit
	limit  int
	option string // the Options field
	flag   string // serve's flag
	frees  string // what makes room
}

func (e *limitError) Error() string {
	return fmt.Sprintf("%s: %s, at most %d (server.Options.%s; serve %s raises it); %s",
		rpc.MsgLimit, e.what, e.limit, e.option, e.flag, e.frees)
}

// over reports whether one more beside the n held would pass limit (0 or
// negative: no limit).
func over(n, limit int) bool { return limit > 0 && n >= limit }

// Server is an open percolator server: the store, the oracle, the lock
// service and the nonce table, ready to Serve.
type Server struct {
	opts   Options
	log    *slog.Logger
	store  *pebble.Store
	format uint64 // the store's on-disk format (txn.EnsureFormat)
	// epoch is this run's number (epoch.go): the reply of every write
	// acknowledged before its log sync carries it.
	epoch uint64
	alloc *oracle.Allocator
	// latchedVersion reads the observer registry's stored version
	// (Options.RegistryVersion) under a row latch, or is nil: one-phase
	// commits built under a registry version check it.
	latchedVersion func(ctx context.Context) (uint64, error)
	nonces         *nonceTable
	locks          *presence // the lock family's index (presence.go)
	coord          *coordService
	metrics        *metrics
	auth           tokenAuth
	// gc is the garbage collector's client of the store (gc.go); nil
	// when it is disabled.
	gc     *txn.Client
	gcStop context.CancelFunc
	gcDone sync.WaitGroup
	// serving is the gRPC server, its health service and the drain
	// signal, as the oracle role's.
	serving

	stop     chan struct{}
	bg       sync.WaitGroup
	failOnce sync.Once
	failed   chan struct{} // closed when the store failed
	failErr  error

	closeOnce sync.Once
	closeErr  error
}

// Open opens the store in opts.Dir (creating it), its oracle and its
// nonce table.
func Open(ctx context.Context, opts Options) (*Server, error) {
	opts.ensureDefaults()
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: server needs a directory", storage.ErrInvalidArgument)
	}
	if opts.GCLifetime < 0 {
		return nil, fmt.Errorf("%w: negative GCLifetime %v", storage.ErrInvalidArgument, opts.GCLifetime)
	}
	s := &Server{opts: opts, log: opts.Logger, stop: make(chan struct{}), failed: make(chan struct{})}
	s.auth = newTokenAuth(opts.Token)
	st, err := pebble.Open(filepath.Join(opts.Dir, "store"), pebble.Options{FS: opts.FS, Logger: s.log, DiskReserve: opts.DiskReserve, MemTableSize: opts.MemTableSize, SyncDelay: opts.SyncDelay})
	if err != nil {
		return nil, err
	}
	s.store = st
	// A store of another format is refused before anything reads or
	// writes it.
	if s.format, err = txn.EnsureFormat(ctx, st); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.epoch, err = nextEpoch(ctx, st); err != nil {
		_ = st.Close()
		return nil, err
	}
	// The lock index: its hook before its load, both before serving.
	s.locks = newPresence(lockFamily)
	if _, err := st.SetApplyHook(s.locks.apply); err != nil {
		_ = st.Close()
		return nil, err
	}
	if err := s.locks.load(ctx, st); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("server: loading the lock index: %w", err)
	}
	// Conditional writes ask the index too, once it is whole.
	st.SetPruner(s.locks.prune)
	s.alloc, err = oracle.OpenStoreAllocator(ctx, st, oracle.StoreOptions{
		Owner: "server/" + coord.NewOwnerID(), Exclusive: true, Logger: s.log,
		Recover: func(ctx context.Context) (uint64, error) { return txn.NewestTimestamp(ctx, st) },
	})
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("server: oracle: %w", err)
	}
	// One-row transactions commit in one call, their timestamps from
	// this oracle (txn/doc.go, "One-phase commit").
	st.SetStamper(s.alloc)
	s.nonces = newNonceTable(st, opts.NonceGrace, time.Now)
	s.nonces.limits = nonceLimits{groups: opts.MaxNonceGroups, calls: opts.MaxNonceCalls, perGroup: opts.MaxNonceCallsPerGroup}
	if err := s.nonces.load(ctx); err != nil {
		_ = s.alloc.Close()
		_ = st.Close()
		return nil, fmt.Errorf("server: loading the nonce table: %w", err)
	}
	if s.coord, err = openCoord(ctx, s); err != nil {
		_ = s.alloc.Close()
		_ = st.Close()
		return nil, fmt.Errorf("server: reading the longest lease: %w", err)
	}
	s.metrics = newMetrics(s)
	sopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opts.MaxMessageSize), grpc.MaxSendMsgSize(opts.MaxMessageSize),
		grpc.ChainUnaryInterceptor(s.metrics.unary, s.auth.unary, takeReserve),
		grpc.ChainStreamInterceptor(s.metrics.stream, s.auth.stream),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.serving.init(sopts)
	s.latchedVersion = versionOf(opts.RegistryVersion, s.store.UnderLatch())
	rpcpb.RegisterStorageServer(s.grpc, &storageService{srv: s})
	rpcpb.RegisterOracleServer(s.grpc, &oracleService{
		alloc: s.alloc, status: s.status, draining: s.draining, served: s.metrics.oracleBatch,
		version: versionOf(opts.RegistryVersion, s.store),
	})
	rpcpb.RegisterCoordServer(s.grpc, s.coord)
	if err := s.startCollector(ctx); err != nil {
		_ = s.alloc.Close()
		_ = st.Close()
		return nil, err
	}
	s.bg.Add(1)
	go s.background()
	return s, nil
}

// Store returns the server's store (tests, in-process tools).
func (s *Server) Store() *pebble.Store { return s.store }

// Serve serves lis until Shutdown or Kill (returning nil), or until the
// store fails (returning the failure).
func (s *Server) Serve(lis net.Listener) error {
	err := s.serve(lis)
	select {
	case <-s.failed:
		return s.failErr
	default:
	}
	return err
}

// MetricsHandler returns the /metrics handler.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// Gatherer returns the registry MetricsHandler serves: the server's
// figures for a reader in the same process (a status page).
func (s *Server) Gatherer() prometheus.Gatherer { return s.metrics.reg }

// Failed is closed when the store failed (the server must exit: a restart
// recovers exactly what reached the disk).
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Shutdown stops accepting calls, tells health watchers NOT_SERVING and
// ends their streams, waits for the calls in flight (or for ctx, then
// cancels them), and closes the oracle, the nonce table and the store.
func (s *Server) Shutdown(ctx context.Context) error {
	_ = s.gracefulStop(ctx) // past ctx the calls were cancelled: close all the same
	return s.close()
}

// Kill stops serving at once, abandoning the calls in flight and closing
// nothing gracefully beyond what a process exit would (tests: with a
// crashable FS, clone it before Kill to model a power cut).
func (s *Server) Kill() {
	s.stopNow()
	_ = s.close()
}

func (s *Server) close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.bg.Wait()
		s.stopCollector()
		flushErr := s.nonces.flush(context.Background())
		s.closeErr = errors.Join(s.alloc.Close(), flushErr, s.store.Close())
	})
	return s.closeErr
}

func (s *Server) background() {
	defer s.bg.Done()
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.coord.sweep()
		if err := s.nonces.flush(context.Background()); err != nil && !errors.Is(err, storage.ErrClosed) {
			s.fail(err)
		}
	}
}

// fail records a store failure once: the server stops serving, and Serve
// returns it.
func (s *Server) fail(err error) {
	if !errors.Is(err, storage.ErrFailed) {
		return
	}
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
		s.log.Error("store failed: stopping (a restart recovers what reached the disk)", "err", err)
		go s.grpc.Stop()
	})
}

// status is grpcStatus, after stopping the server if the store failed
// (fail).
func (s *Server) status(err error) error {
	s.fail(err)
	return grpcStatus(err)
}
