package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/oracle"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
)

// ClientOptions is the work of one client process of the server's oracle
// figure (percolator bench-client).
type ClientOptions struct {
	// Mode is "oracle" (timestamps from the batching client) or "ping"
	// (empty unary calls).
	Mode string
	// Goroutines call concurrently for Duration, from Start on (so that
	// the processes of one measurement start together).
	Goroutines int
	Duration   time.Duration
	Start      time.Time
}

// ClientResult is what a client process measured, per second: the rate
// (timestamps or calls) and the calls it took.
type ClientResult struct{ Rate, Calls float64 }

func (r ClientResult) String() string { return fmt.Sprintf("rate %f calls %f", r.Rate, r.Calls) }

// RunClient runs one client process's load on the server behind conn.
func RunClient(ctx context.Context, conn *rpc.Conn, o ClientOptions) (ClientResult, error) {
	time.Sleep(time.Until(o.Start))
	switch o.Mode {
	case "oracle":
		b := &countingBackend{Backend: oracleremote.New(conn)}
		start := time.Now()
		r, err := oracle.Throughput(ctx, oracle.NewClient(b), o.Goroutines, o.Duration)
		if err != nil {
			return ClientResult{}, err
		}
		return ClientResult{Rate: r, Calls: float64(b.calls.Load()) / time.Since(start).Seconds()}, nil
	case "ping":
		r := rate(ctx, o.Goroutines, o.Duration, func(*rand.Rand) error {
			_, err := conn.Storage.Ping(ctx, &rpcpb.PingRequest{})
			return err
		})
		return ClientResult{Rate: r, Calls: r}, nil
	}
	return ClientResult{}, fmt.Errorf("%w: client mode %q (oracle or ping)", ErrInvalidArgument, o.Mode)
}

// countingBackend counts a remote oracle's requests.
type countingBackend struct {
	oracle.Backend
	calls atomic.Int64
}

func (b *countingBackend) Allocate(ctx context.Context, n int) (uint64, error) {
	b.calls.Add(1)
	return b.Backend.Allocate(ctx, n)
}
