package server

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// MaxAllocate bounds the timestamps one oracle request may take.
const MaxAllocate = 1 << 20

// oracleService hands out timestamps from an allocator: the server's (its
// high-water mark and lease live in the store, as the embedded DB's), or
// an elected oracle's (the oracle role, NewOracleServer).
type oracleService struct {
	rpcpb.UnimplementedOracleServer
	alloc oracle.Backend
	// version reads the observer registry's stored version, after the
	// allocation; nil: none was given (RegistryVersion), or no store (the
	// oracle role without one), and replies carry no version.
	version func(ctx context.Context) (uint64, error)
	// status maps an allocation or version error to a gRPC status.
	status func(error) error
	// draining is closed when the server begins shutting down.
	draining <-chan struct{}
	// served counts a request of count timestamps; nil: no metrics.
	served func(count uint32)
}

// RegistryVersion reads the observer registry's stored version from st:
// observer.StoredVersion is the one to give (Options.RegistryVersion,
// OracleOptions.RegistryVersion). The server calls it after each
// allocation and sends the version with the timestamps, so that it is the
// registry re-read of every committer whose request the reply answers
// (their requests followed their last prewrites; txn.VersionedOracle).
//
// It is given to the server rather than called by it: the registry and
// its format are package observer's, and the server serves storage,
// timestamps and sessions without linking the observer layer. A server
// given none sends no version, which is correct too: a committer whose
// timestamp came without one reads the registry itself.
type RegistryVersion func(ctx context.Context, st storage.Store) (uint64, error)

// versionOf is oracleService's version: rv reading st, or nil (no
// version) when either is missing.
func versionOf(rv RegistryVersion, st storage.Store) func(ctx context.Context) (uint64, error) {
	if rv == nil || st == nil {
		return nil
	}
	return func(ctx context.Context) (uint64, error) { return rv(ctx, st) }
}

// Allocate implements rpcpb.OracleServer.
func (o *oracleService) Allocate(ctx context.Context, req *rpcpb.AllocateRequest) (*rpcpb.AllocateResponse, error) {
	if req.Count == 0 || req.Count > MaxAllocate {
		return nil, status.Errorf(codes.InvalidArgument, "count %d outside [1, %d]", req.Count, MaxAllocate)
	}
	first, err := o.alloc.Allocate(ctx, int(req.Count))
	if err != nil {
		return nil, o.status(err)
	}
	resp := &rpcpb.AllocateResponse{First: first}
	if o.version != nil {
		ver, err := o.version(ctx)
		if err != nil {
			return nil, o.status(err)
		}
		resp.ObserversVersion = &ver
	}
	if o.served != nil {
		o.served(req.Count)
	}
	return resp, nil
}

// AllocateStream implements rpcpb.OracleServer: each request is answered
// in order on the stream. A stream lives as long as its client, so
// Shutdown ends it instead of waiting for it to end: it sends first = 0
// (never a timestamp), on which the client reopens the stream, reaching
// the next server, and returns, whether or not a request is in flight.
// (Sending first = 0 and going on waiting in Recv kept an idle client's
// stream, and Shutdown with it, open until the client's next request.)
func (o *oracleService) AllocateStream(stream grpc.BidiStreamingServer[rpcpb.AllocateRequest, rpcpb.AllocateResponse]) error {
	ctx := stream.Context()
	reqs, errc := make(chan *rpcpb.AllocateRequest), make(chan error, 1)
	go func() { // Recv cannot be interrupted but by the handler's return
		for {
			req, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done(): // the handler returned
				return
			}
		}
	}()
	for {
		select {
		case <-o.draining:
			return stream.Send(&rpcpb.AllocateResponse{First: 0})
		case err := <-errc:
			if err == io.EOF {
				return nil
			}
			return err
		case req := <-reqs:
			resp, err := o.Allocate(ctx, req)
			if err != nil {
				return err
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}
