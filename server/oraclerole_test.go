package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// switchable is an allocator that can be told it does not lead.
type switchable struct {
	a       *oracle.Allocator
	leading atomic.Bool
}

func (s *switchable) Allocate(ctx context.Context, n int) (uint64, error) {
	if !s.leading.Load() {
		return 0, fmt.Errorf("%w: standing by (test)", oracle.ErrNotLeader)
	}
	return s.a.Allocate(ctx, n)
}

// startRole serves alloc as the oracle role on a loopback port until the
// test ends.
func startRole(t *testing.T, alloc oracle.Backend, opts server.OracleOptions) (string, *server.OracleServer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewOracleServer(alloc, opts)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String(), srv
}

// TestOracleRole: the oracle role hands out its allocator's timestamps
// with no registry version, through rpc.Dial and oracle/remote; while its
// allocator does not lead it answers Unavailable saying so; it serves
// nothing of the storage service but Ping.
func TestOracleRole(t *testing.T) {
	a, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sw := &switchable{a: a}
	sw.leading.Store(true)
	addr, _ := startRole(t, sw, server.OracleOptions{})
	conn, err := rpc.Dial(ctx, addr, rpc.DialOptions{RetryBudget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	be := remote.New(conn)
	defer be.Close()
	first, ver, ok, err := be.AllocateVersioned(ctx, 5)
	if err != nil || first != 1 || ok {
		t.Fatalf("allocate: %d (version %d, ok %v), %v; want 1, no version", first, ver, ok, err)
	}
	if resp, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 1}); err != nil || resp.First != 6 || resp.ObserversVersion != nil {
		t.Fatalf("unary allocate: %v, %v; want 6, no version", resp, err)
	}

	sw.leading.Store(false)
	_, err = conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 1})
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "not the leader") {
		t.Fatalf("a standby's answer: %v; want Unavailable, not the leader", err)
	}
	if _, err := be.Allocate(ctx, 1); !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), "not the leader") {
		t.Fatalf("a standby's answer on the stream: %v", err)
	}
	sw.leading.Store(true)
	if first, err := be.Allocate(ctx, 1); err != nil || first != 7 {
		t.Fatalf("leading again: %d, %v; want 7", first, err)
	}

	if _, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 0}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("count 0: %v", err)
	}
	if _, err := conn.Storage.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: []byte("r")}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ReadRow on the oracle role: %v; want Unimplemented", err)
	}
}

// TestOracleRoleToken: with a token, a client without it is refused at
// Dial, and a call without it changes nothing.
func TestOracleRoleToken(t *testing.T) {
	a, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	addr, _ := startRole(t, a, server.OracleOptions{Token: "s3cret"})
	if _, err := rpc.Dial(ctx, addr, rpc.DialOptions{Token: "wrong"}); !errors.Is(err, rpc.ErrUnauthenticated) {
		t.Fatalf("dial with a wrong token: %v", err)
	}
	if _, err := rpcpb.NewOracleClient(rawConn(t, addr)).Allocate(ctx, &rpcpb.AllocateRequest{Count: 1}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("allocate without a token: %v", err)
	}
	conn, err := rpc.Dial(ctx, addr, rpc.DialOptions{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if first := allocate(t, conn); first != 1 {
		t.Fatalf("first timestamp with the token: %d; want 1 (nothing handed out before)", first)
	}
}

// TestOracleRoleShutdownEndsStreams: Shutdown ends an open allocation
// stream at once (first = 0), idle or not, instead of waiting for it.
func TestOracleRoleShutdownEndsStreams(t *testing.T) {
	a, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	addr, srv := startRole(t, a, server.OracleOptions{})
	stream, err := rpcpb.NewOracleClient(rawConn(t, addr)).AllocateStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpcpb.AllocateRequest{Count: 1}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.First != 1 {
		t.Fatalf("stream: %v, %v", resp, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown with an idle stream open: %v", err)
	}
	if resp, err := stream.Recv(); err != nil || resp.First != 0 {
		t.Fatalf("after Shutdown the stream got %v, %v; want first = 0", resp, err)
	}
}

// hookedAlloc runs a hook, once, inside Allocate after the range is
// allocated: something that happens while an allocation is in flight.
type hookedAlloc struct {
	a    *oracle.Allocator
	hook atomic.Pointer[func()]
}

func (h *hookedAlloc) Allocate(ctx context.Context, n int) (uint64, error) {
	first, err := h.a.Allocate(ctx, n)
	if f := h.hook.Swap(nil); f != nil {
		(*f)()
	}
	return first, err
}

// TestOracleRoleVersion: given the store, the oracle role's replies carry
// the observer registry version read after allocating: 0 (present) before
// any registration, a registration between two allocations is seen by
// the second, and one made while an allocation is in flight, after its
// range was allocated, by that allocation's own reply. Without a store
// there is no version (TestOracleRole).
func TestOracleRoleVersion(t *testing.T) {
	st := memory.New()
	db, err := percolator.Open(ctx, percolator.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	observe := func(name string) {
		noop := func(context.Context, *percolator.Txn, string, string) error { return nil }
		if err := db.Observe(ctx, percolator.Observer{Name: name, Column: "col-" + name, Fn: noop}); err != nil {
			t.Error(err)
		}
	}
	stored := func() uint64 {
		v, err := observer.StoredVersion(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := &hookedAlloc{a: a}
	addr, _ := startRole(t, h, server.OracleOptions{Store: st, RegistryVersion: observer.StoredVersion})
	conn, err := rpc.Dial(ctx, addr, rpc.DialOptions{RetryBudget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	be := remote.New(conn)
	defer be.Close()
	version := func() uint64 {
		t.Helper()
		_, v, ok, err := be.AllocateVersioned(ctx, 1)
		if err != nil || !ok {
			t.Fatalf("allocate: version %d ok %v, %v; want a version", v, ok, err)
		}
		return v
	}

	if v := version(); v != 0 {
		t.Fatalf("nothing registered: version %d; want 0", v)
	}
	observe("a")
	if v, want := version(), stored(); v != want || v == 0 {
		t.Fatalf("after a registration: version %d; want the stored %d", v, want)
	}
	before := stored()
	register := func() { observe("b") }
	h.hook.Store(&register)
	if v, want := version(), stored(); v != want || v <= before {
		t.Fatalf("registered during the allocation: version %d; want the stored %d, above %d (read after allocating)", v, want, before)
	}
}
