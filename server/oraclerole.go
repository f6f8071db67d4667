package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

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
	log *slog.Logger
	serving
}

// NewOracleServer returns a server of alloc's timestamps, ready to Serve.
func NewOracleServer(alloc oracle.Backend, opts OracleOptions) *OracleServer {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &OracleServer{log: opts.Logger}
	auth := newTokenAuth(opts.Token)
	sopts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(auth.unary),
		grpc.ChainStreamInterceptor(auth.stream),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.serving.init(sopts)
	rpcpb.RegisterOracleServer(s.grpc, &oracleService{
		alloc: alloc, status: grpcStatus, draining: s.draining,
		version: versionOf(opts.RegistryVersion, opts.Store),
	})
	rpcpb.RegisterStorageServer(s.grpc, pingOnly{})
	return s
}

// Serve serves lis until Shutdown or Stop (then it returns nil).
func (s *OracleServer) Serve(lis net.Listener) error { return s.serve(lis) }

// Shutdown stops accepting calls, ends the allocation streams (first = 0:
// their clients reopen them, at the next leader) and waits for the calls
// in flight, or for ctx, then cancels them. It closes nothing of the
// allocator.
func (s *OracleServer) Shutdown(ctx context.Context) error { return s.gracefulStop(ctx) }

// Stop stops serving at once, abandoning the calls in flight.
func (s *OracleServer) Stop() { s.stopNow() }

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
