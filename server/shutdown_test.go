package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// watchHealth opens a health Watch stream on addr and returns the
// statuses it receives, closed when the stream ends, after the first.
func watchHealth(t *testing.T, addr string) <-chan healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	stream, err := healthpb.NewHealthClient(rawConn(t, addr)).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health status %v (%v), want SERVING", first.GetStatus(), err)
	}
	out := make(chan healthpb.HealthCheckResponse_ServingStatus, 8)
	go func() {
		defer close(out)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			out <- r.Status
		}
	}()
	return out
}

// shutdownWithin runs shutdown with a context of its own and fails the
// test if it had to cut calls short at that context's end: an idle health
// Watch must not hold a drain. The minute only detects a hang.
func shutdownWithin(t *testing.T, shutdown func(context.Context) error, statuses <-chan healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := shutdown(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Shutdown waited for its context's end (an idle health Watch held it): %v", err)
	}
	var seen []healthpb.HealthCheckResponse_ServingStatus
	for s := range statuses {
		seen = append(seen, s)
	}
	if len(seen) == 0 || seen[len(seen)-1] != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the watcher saw %v before its stream ended; want NOT_SERVING last", seen)
	}
}

// TestShutdownEndsHealthWatch: Shutdown tells a health watcher the
// server is NOT_SERVING and ends its stream, instead of waiting for the
// watcher to hang up (for the whole drain timeout).
func TestShutdownEndsHealthWatch(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	shutdownWithin(t, srv.Shutdown, watchHealth(t, srv.Addr))
}

// TestOracleServerShutdownEndsHealthWatch: the same for the oracle role.
func TestOracleServerShutdownEndsHealthWatch(t *testing.T) {
	srv := server.NewOracleServer(nopBackend{}, server.OracleOptions{Logger: slog.New(slog.DiscardHandler)})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	shutdownWithin(t, srv.Shutdown, watchHealth(t, lis.Addr().String()))
}

type nopBackend struct{}

func (nopBackend) Allocate(context.Context, int) (uint64, error) {
	return 0, errors.New("not used")
}
