package server

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
)

// MaxAllocate bounds the timestamps one oracle request may take.
const MaxAllocate = 1 << 20

// oracleService hands out timestamps from the server's allocator (its
// high-water mark and lease live in the store, as the embedded DB's).
type oracleService struct {
	rpcpb.UnimplementedOracleServer
	srv *Server
}

// Allocate implements rpcpb.OracleServer.
func (o *oracleService) Allocate(ctx context.Context, req *rpcpb.AllocateRequest) (*rpcpb.AllocateResponse, error) {
	if req.Count == 0 || req.Count > MaxAllocate {
		return nil, status.Errorf(codes.InvalidArgument, "count %d outside [1, %d]", req.Count, MaxAllocate)
	}
	first, err := o.srv.alloc.Allocate(ctx, int(req.Count))
	if err != nil {
		return nil, o.srv.status(err)
	}
	o.srv.metrics.batches.Inc()
	o.srv.metrics.batchTS.Observe(float64(req.Count))
	return &rpcpb.AllocateResponse{First: first}, nil
}

// AllocateStream implements rpcpb.OracleServer: each request is answered
// in order on the stream. A stream lives as long as its client, so
// Shutdown ends it (Unavailable: the client reopens it on the next
// server) instead of waiting for it to end.
func (o *oracleService) AllocateStream(stream grpc.BidiStreamingServer[rpcpb.AllocateRequest, rpcpb.AllocateResponse]) error {
	ctx := stream.Context()
	type recv struct {
		req *rpcpb.AllocateRequest
		err error
	}
	reqs := make(chan recv)
	go func() {
		for {
			req, err := stream.Recv()
			select {
			case reqs <- recv{req, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r recv
		select {
		case r = <-reqs:
		case <-o.srv.draining:
			return status.Error(codes.Unavailable, "server shutting down")
		}
		if r.err == io.EOF {
			return nil
		}
		if r.err != nil {
			return r.err
		}
		resp, err := o.Allocate(ctx, r.req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
