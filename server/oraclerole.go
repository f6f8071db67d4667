package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// OracleOptions configures NewOracleServer.
type OracleOptions struct {
	// Token, if set, is required on every RPC (rpc.TokenHeader).
	Token string
	// TLS, if set, serves TLS.
	TLS *tls.Config
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Store, if set, is the deployment's store, the one the oracle's
	// clients write (`percolator oracle --bigtable`): with
	// RegistryVersion, each reply carries the observer registry version
	// read from it after allocating, as `percolator serve` does, so a
	// committer need not read the registry itself (txn.VersionedOracle).
	// A reply whose read fails is an error, its timestamps unused. The
	// caller owns Store and closes it after the server stops.
	//
	// Invariant: Store is the clients' store. A version read from another
	// store would let a committer skip a registration it must see
	// (observer invariant 1).
	Store storage.Store
	// RegistryVersion reads the version from Store: give
	// observer.StoredVersion. Without it, or without Store, replies carry
	// no version and the clients re-read the registry themselves.
	RegistryVersion RegistryVersion
}

// OracleServer is the oracle role of the distributed deployment
// (`percolator oracle`): the Oracle service over an allocator that keeps
// no data in the store, typically an elected one (oracle/etcd.Candidate),
// plus health and Storage.Ping, the no-op rpc.Dial checks a server with,
// and nothing else of the Storage service. With OracleOptions.Store and
// RegistryVersion its replies carry the observer registry version read
// after allocating; without, none (the field is absent), and its clients
// (oracle/etcd.OracleBackend) re-read the registry themselves.
//
// An allocation refused with oracle.ErrNotLeader (the candidate stands
// by, or cannot prove its lease) or oracle.ErrClosed is answered
// codes.Unavailable, with the reason, so a client resolves the leader
// again.
type OracleServer struct {
	log       *slog.Logger
	grpc      *grpc.Server
	health    *health.Server
	draining  chan struct{}
	drainOnce sync.Once
}

// NewOracleServer returns a server of alloc's timestamps, ready to Serve.
func NewOracleServer(alloc oracle.Backend, opts OracleOptions) *OracleServer {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &OracleServer{log: opts.Logger, health: health.NewServer(), draining: make(chan struct{})}
	auth := newTokenAuth(opts.Token)
	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(auth.unary),
		grpc.ChainStreamInterceptor(auth.stream),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(sopts...)
	rpcpb.RegisterOracleServer(s.grpc, &oracleService{
		alloc: alloc, status: roleStatus, draining: s.draining,
		version: versionOf(opts.RegistryVersion, opts.Store),
	})
	rpcpb.RegisterStorageServer(s.grpc, pingOnly{})
	healthpb.RegisterHealthServer(s.grpc, drainingHealth{s.health, s.draining})
	return s
}

// Serve serves lis until Shutdown or Stop (then it returns nil).
func (s *OracleServer) Serve(lis net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown stops accepting calls, ends the allocation streams (first = 0:
// their clients reopen them, at the next leader) and waits for the calls
// in flight, or for ctx, then cancels them. It closes nothing of the
// allocator.
func (s *OracleServer) Shutdown(ctx context.Context) error {
	s.health.Shutdown()
	s.drainOnce.Do(func() { close(s.draining) })
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return ctx.Err()
	}
}

// Stop stops serving at once, abandoning the calls in flight.
func (s *OracleServer) Stop() {
	s.drainOnce.Do(func() { close(s.draining) })
	s.grpc.Stop()
}

// roleStatus maps an allocation error of the oracle role to a gRPC status.
func roleStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, oracle.ErrNotLeader), errors.Is(err, oracle.ErrClosed), errors.Is(err, oracle.ErrLeaseLost):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, oracle.ErrInvalidArgument), errors.Is(err, storage.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// pingOnly is the Storage service of the oracle role: Ping, which
// rpc.Dial calls to check that a server answers (and takes the token),
// and Unimplemented for everything else.
type pingOnly struct {
	rpcpb.UnimplementedStorageServer
}

// Ping implements rpcpb.StorageServer.
func (pingOnly) Ping(context.Context, *rpcpb.PingRequest) (*rpcpb.PingResponse, error) {
	return &rpcpb.PingResponse{}, nil
}
