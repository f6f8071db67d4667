// Package remote is the oracle's RPC backend: timestamps from a percolator
// server. Wrap it in an oracle.Client, which keeps at most one request in
// flight per process and shares each answer among the callers that were
// waiting when it was sent (DESIGN invariant 1).
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
)

// Backend implements oracle.Backend over a server connection, on one
// long-lived AllocateStream (a request and its answer cost a message each
// way, not a call). A request whose reply is lost is sent again: the
// timestamps of the lost reply are never used, which is harmless (only
// reuse is not). A broken stream is reopened by the next request.
//
// Concurrency: mu serializes requests (the oracle.Client sends one at a
// time anyway) and guards the stream.
type Backend struct {
	conn *rpc.Conn
	mu   sync.Mutex
	// stream and cancel are the open stream, or nil.
	stream rpcpb.Oracle_AllocateStreamClient
	cancel context.CancelFunc
}

var _ oracle.VersionedBackend = (*Backend)(nil)

// New returns a Backend on conn.
func New(conn *rpc.Conn) *Backend { return &Backend{conn: conn} }

// Allocate implements oracle.Backend, bounded by the connection's
// per-attempt deadline and retry budget.
func (b *Backend) Allocate(ctx context.Context, n int) (uint64, error) {
	first, _, _, err := b.AllocateVersioned(ctx, n)
	return first, err
}

// AllocateVersioned implements oracle.VersionedBackend: the version is the
// server's observer registry version, read after allocating; ok is false
// when the reply has none (a server given no registry reader, or an
// oracle role run without a store).
func (b *Backend) AllocateVersioned(ctx context.Context, n int) (first, version uint64, ok bool, err error) {
	if n < 1 {
		return 0, 0, false, fmt.Errorf("oracle: allocate %d timestamps", n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var resp *rpcpb.AllocateResponse
	err = b.conn.Do(ctx, func(actx context.Context, _ int) error {
		var err error
		resp, err = b.once(actx, uint32(n))
		if err != nil {
			b.closeLocked()
		}
		return err
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("oracle: %w", err)
	}
	return resp.First, resp.GetObserversVersion(), resp.ObserversVersion != nil, nil
}

// once sends one request on the stream (opening it if needed) and waits
// for its answer until actx ends.
func (b *Backend) once(actx context.Context, n uint32) (*rpcpb.AllocateResponse, error) {
	if b.stream == nil {
		sctx, cancel := context.WithCancel(context.Background())
		stream, err := b.conn.Oracle.AllocateStream(sctx)
		if err != nil {
			cancel()
			return nil, err
		}
		b.stream, b.cancel = stream, cancel
	}
	// The attempt's deadline ends the stream, and with it a Recv that
	// would otherwise wait for a server that does not answer.
	var expired atomic.Bool
	cancel := b.cancel
	stop := context.AfterFunc(actx, func() { expired.Store(true); cancel() })
	defer stop()
	if err := b.stream.Send(&rpcpb.AllocateRequest{Count: n}); err != nil {
		// io.EOF from Send means the server ended the stream; its status
		// (Unauthenticated, say) is what Recv returns.
		if errors.Is(err, io.EOF) {
			if _, rerr := b.stream.Recv(); rerr != nil {
				err = rerr
			}
		}
		return nil, b.streamErr(err, &expired)
	}
	resp, err := b.stream.Recv()
	if err != nil {
		return nil, b.streamErr(err, &expired)
	}
	if resp.First == 0 { // the server is shutting down: reopen elsewhere
		return nil, status.Error(codes.Unavailable, "oracle stream: the server is shutting down")
	}
	return resp, nil
}

// streamErr is a stream failure as a retryable status when the stream
// ended (the server went away, or the attempt's deadline cancelled it).
func (b *Backend) streamErr(err error, expired *atomic.Bool) error {
	if expired.Load() || errors.Is(err, io.EOF) {
		return status.Error(codes.Unavailable, "oracle stream ended: "+err.Error())
	}
	return err
}

func (b *Backend) closeLocked() {
	if b.cancel != nil {
		b.cancel()
	}
	b.stream, b.cancel = nil, nil
}

// Close ends the stream.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked()
}

// NewClient returns an oracle.Client over the server at conn.
func NewClient(conn *rpc.Conn) *oracle.Client { return oracle.NewClient(New(conn)) }
