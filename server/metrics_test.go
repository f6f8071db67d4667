package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// TestMetrics: /metrics exposes the RPCs by method and code, their
// latency, the oracle's batches, the nonce table's size and the
// transaction steps seen as CheckAndMutate calls.
func TestMetrics(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{}) // one Ping
	st := servertest.Store(t, conn, remote.Options{})
	if _, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil {
		t.Fatal(err)
	}
	// A prewrite, as the server classifies it: a lock written if absent.
	lock := []storage.Mutation{storage.SetCell(txn.FamilyLock, "col", 5, []byte("l"))}
	if _, err := st.CheckAndMutate(ctx, []byte("r"), storage.Filter{{Family: txn.FamilyLock, Qualifier: "col"}}, nil, lock); err != nil {
		t.Fatal(err)
	}
	allocate(t, conn)
	allocate(t, conn)
	if _, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Allocate of 0: %v", err)
	}

	for series, want := range map[string]float64{
		`percolator_rpc_requests_total{code="OK",method="Ping"}`:                   1,
		`percolator_rpc_requests_total{code="OK",method="OpenNonceGroup"}`:         1,
		`percolator_rpc_requests_total{code="OK",method="Increment"}`:              2,
		`percolator_rpc_requests_total{code="OK",method="CheckAndMutate"}`:         1,
		`percolator_rpc_requests_total{code="OK",method="Allocate"}`:               2,
		`percolator_rpc_requests_total{code="InvalidArgument",method="Allocate"}`:  1,
		`percolator_rpc_duration_seconds_count{method="Increment"}`:                2,
		`percolator_rpc_duration_seconds_bucket{method="Increment",le="+Inf"}`:     2,
		`percolator_oracle_batches_total`:                                          2,
		`percolator_nonce_table_calls`:                                             1, // the marks dropped the first two
		`percolator_nonce_table_groups`:                                            1,
		`percolator_txn_cas_total{kind="prewrite"}`:                                1,
		`percolator_txn_cas_total{kind="commit"}`:                                  0,
		`percolator_nonce_replays_total{method="Increment"}`:                       0,
		`percolator_rpc_requests_total{code="Unauthenticated",method="Increment"}`: 0,
	} {
		got, ok := metricOK(t, srv, series)
		if got != want || (!ok && want != 0) {
			t.Errorf("%s = %v (exposed: %v), want %v", series, got, ok, want)
		}
	}
	if sum := metric(t, srv, `percolator_rpc_duration_seconds_sum{method="Increment"}`); sum <= 0 {
		t.Errorf("Increment latency sum %v, want > 0", sum)
	}
}

// health returns the server's health as a new client sees it.
func health(t *testing.T, addr string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(rawConn(t, addr)).Check(c, &healthpb.HealthCheckRequest{})
	return resp.GetStatus(), err
}

// blockedScan fills the store with more rows than flow control lets the
// server send unread, and starts a Scan read one message far: the call is
// then in flight on the server, blocked in Send.
func blockedScan(t *testing.T, srv *servertest.Server, rows int) (grpc.ServerStreamingClient[rpcpb.ScanResponse], int) {
	t.Helper()
	muts := make([]storage.RowMutation, rows)
	for i := range muts {
		muts[i] = storage.RowMutation{Row: fmt.Appendf(nil, "row%05d", i), Mutations: []storage.Mutation{storage.SetCell("c", "v", 1, make([]byte, 8<<10))}}
	}
	if _, err := srv.Store().MutateRows(ctx, muts); err != nil {
		t.Fatal(err)
	}
	// A fixed window: gRPC's dynamic window would let the whole scan
	// into the client's buffers.
	cc, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	stream, err := rpcpb.NewStorageClient(cc).Scan(ctx, &rpcpb.ScanRequest{Filter: []*rpcpb.Selector{{Family: []byte("c"), AllQualifiers: true}}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, len(msg.Rows)
}

// drain reads the rest of a scan and returns the rows read.
func drain(stream grpc.ServerStreamingClient[rpcpb.ScanResponse]) (int, error) {
	n := 0
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += len(msg.Rows)
	}
}

// TestShutdownDrains: the server reports SERVING; Shutdown stops taking
// calls (health is no longer SERVING) but waits for the call in flight,
// which completes whole, and then returns; afterwards the server is
// unavailable.
func TestShutdownDrains(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	if s, err := health(t, srv.Addr); err != nil || s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v; want SERVING", s, err)
	}
	const rows = 256 // 2 MiB
	stream, read := blockedScan(t, srv, rows)
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		done <- srv.Shutdown(c)
	}()
	waitFor(t, "health is no longer SERVING", func() bool {
		s, err := health(t, srv.Addr)
		return err != nil || s != healthpb.HealthCheckResponse_SERVING
	})
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a Scan in flight", err)
	default:
	}
	n, err := drain(stream)
	if err != nil || read+n != rows {
		t.Fatalf("the Scan in flight read %d rows (%v), want all %d", read+n, err, rows)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_, err = health(t, srv.Addr)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("health after Shutdown: %v, want Unavailable", err)
	}
}

// TestShutdownDeadline: a call still in flight when Shutdown's context
// ends is cancelled, and Shutdown returns.
func TestShutdownDeadline(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	stream, _ := blockedScan(t, srv, 256)
	c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(c); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := drain(stream); err == nil {
		t.Fatal("the Scan cut by Shutdown's deadline ended cleanly")
	}
}

// TestShutdownEndsIdleOracleStream: a client's oracle stream lives as
// long as the client; Shutdown must end it, not wait for it, even while
// the client has no request in flight.
func TestShutdownEndsIdleOracleStream(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	backend := oracleremote.New(conn)
	defer backend.Close()
	if _, err := backend.Allocate(ctx, 1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		done <- srv.Shutdown(c)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waits for an idle oracle stream after 10s")
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := backend.Allocate(c, 1); err == nil {
		t.Fatal("Allocate after Shutdown succeeded")
	}
}
