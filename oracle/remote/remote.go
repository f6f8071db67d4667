// Package remote is the oracle's RPC backend: timestamps from a percolator
// server. Wrap it in an oracle.Client, which keeps at most one request in
// flight per process and shares each answer among the callers that were
// waiting when it was sent (DESIGN invariant 1).
package remote

import (
	"context"
	"fmt"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
)

// Backend implements oracle.Backend over a server connection. A request
// whose reply is lost is sent again: the timestamps of the lost reply are
// never used, which is harmless (only reuse is not).
type Backend struct{ conn *rpc.Conn }

var _ oracle.Backend = (*Backend)(nil)

// New returns a Backend on conn.
func New(conn *rpc.Conn) *Backend { return &Backend{conn: conn} }

// Allocate implements oracle.Backend, bounded by the connection's
// per-attempt deadline and retry budget.
func (b *Backend) Allocate(ctx context.Context, n int) (uint64, error) {
	if n < 1 {
		return 0, fmt.Errorf("oracle: allocate %d timestamps", n)
	}
	var first uint64
	err := b.conn.Do(ctx, func(ctx context.Context, _ int) error {
		resp, err := b.conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: uint32(n)})
		if err == nil {
			first = resp.First
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("oracle: %w", err)
	}
	return first, nil
}

// NewClient returns an oracle.Client over the server at conn.
func NewClient(conn *rpc.Conn) *oracle.Client { return oracle.NewClient(New(conn)) }
