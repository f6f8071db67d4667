package server

import (
	"context"
	"io"
	"sync"

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
// Shutdown ends it instead of waiting for it to end: it sends first = 0
// (never a timestamp), on which the client reopens the stream, reaching
// the next server.
func (o *oracleService) AllocateStream(stream grpc.BidiStreamingServer[rpcpb.AllocateRequest, rpcpb.AllocateResponse]) error {
	ctx := stream.Context()
	var sendMu sync.Mutex // Send is not safe for concurrent use
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-o.srv.draining:
			sendMu.Lock()
			_ = stream.Send(&rpcpb.AllocateResponse{First: 0})
			sendMu.Unlock()
		case <-done:
		case <-ctx.Done():
		}
	}()
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := o.Allocate(ctx, req)
		if err != nil {
			return err
		}
		sendMu.Lock()
		err = stream.Send(resp)
		sendMu.Unlock()
		if err != nil {
			return err
		}
	}
}
