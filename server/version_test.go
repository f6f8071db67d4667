package server_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
)

// openServing opens a server with opts as given (servertest.Start would
// fill in RegistryVersion) and serves it on a loopback port until the
// test ends.
func openServing(t *testing.T, opts server.Options) (*server.Server, string) {
	t.Helper()
	opts.Dir = t.TempDir()
	srv, err := server.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Kill()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

// TestRegistryVersionFromAbove: the server reads no observer registry of
// its own. Without Options.RegistryVersion its oracle replies carry no
// version (a committer then reads the registry itself); with it, every
// reply carries what it returns for the server's own store, read for that
// reply; and a failed read fails the reply rather than send it without.
func TestRegistryVersionFromAbove(t *testing.T) {
	ctx := context.Background()
	_, addr := openServing(t, server.Options{})
	conn := servertest.Dial(t, addr, rpc.DialOptions{})
	resp, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 2})
	if err != nil || resp.ObserversVersion != nil {
		t.Fatalf("without RegistryVersion: %v, %v; want a reply without a version", resp, err)
	}

	var (
		reads atomic.Int64
		fail  atomic.Bool
		seen  atomic.Value // the store RegistryVersion was given
	)
	errRead := errors.New("registry read failed (test)")
	rv := func(_ context.Context, st storage.Store) (uint64, error) {
		seen.Store(st)
		if fail.Load() {
			return 0, errRead
		}
		return uint64(40 + reads.Add(1)), nil
	}
	served, addr := openServing(t, server.Options{RegistryVersion: rv})
	conn = servertest.Dial(t, addr, rpc.DialOptions{})
	for want := uint64(41); want <= 43; want++ {
		resp, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 1})
		if err != nil || resp.ObserversVersion == nil || *resp.ObserversVersion != want {
			t.Fatalf("with RegistryVersion: %v, %v; want version %d", resp, err, want)
		}
	}
	if got := seen.Load(); got != storage.Store(served.Store()) {
		t.Fatalf("RegistryVersion was given %v, not the server's store", got)
	}
	fail.Store(true)
	if resp, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 1}); status.Code(err) != codes.Internal {
		t.Fatalf("a failed registry read: %v, %v; want Internal and no timestamps", resp, err)
	}
}
