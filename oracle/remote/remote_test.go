package remote_test

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

var (
	seedFlag = flag.Uint64("seed", 0, "seed of TestMonotonicAcrossPowerCuts (0: from the clock)")
	restarts = flag.Int("restarts", 40, "restarts in TestMonotonicAcrossPowerCuts")
)

// TestMonotonicAcrossPowerCuts: a server on a crashable in-memory disk
// hands out timestamps through oracle/remote, and its power is cut (the
// disk keeps what was synced, sometimes half or all of the rest too; one
// time in ten it stops cleanly instead) and it restarts, 40 times (-restarts):
// every timestamp handed out is strictly above every one handed out
// before. Each incarnation has a fresh client, so the clients' own checks
// cannot hide a regression.
func TestMonotonicAcrossPowerCuts(t *testing.T) { monotonicAcrossPowerCuts(t, *restarts) }

// TestFaultSuiteMonotonicAcrossPowerCuts (PERCOLATOR_FAULT_SUITE=1) is
// TestMonotonicAcrossPowerCuts with 300 restarts.
func TestFaultSuiteMonotonicAcrossPowerCuts(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("a fault soak: set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	monotonicAcrossPowerCuts(t, 300)
}

func monotonicAcrossPowerCuts(t *testing.T, restarts int) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	fs := vfs.NewCrashableMem()
	var high uint64 // the highest timestamp handed out
	taken := func(first uint64, n int, what string, i int) {
		t.Helper()
		if first <= high {
			t.Fatalf("incarnation %d: %s handed out %d, not above %d handed out before (seed %d)", i, what, first, high, seed)
		}
		high = first + uint64(n) - 1
	}
	for i := range restarts {
		srv := servertest.Start(t, server.Options{FS: fs, Dir: "/db", Logger: quiet}, "")
		conn, err := rpc.Dial(ctx, srv.Addr, rpc.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		backend, client := remote.New(conn), remote.NewClient(conn)
		for range 1 + rng.IntN(4) {
			if rng.IntN(2) == 0 {
				ts, err := client.Timestamp(ctx)
				if err != nil {
					t.Fatal(err)
				}
				taken(ts, 1, "Client.Timestamp", i)
				continue
			}
			n := 1 + rng.IntN(5000)
			first, err := backend.Allocate(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			taken(first, n, "Backend.Allocate", i)
		}
		conn.Close()
		if i%10 == 9 {
			// A clean stop now and then: the store compacts what the
			// incarnations cut short left (a store that only ever
			// crashes grows by a table and a manifest each time).
			if err := srv.Stop(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		cut := vfs.CrashCloneCfg{RNG: rng}
		switch rng.IntN(8) {
		case 0:
			cut.UnsyncedDataPercent = 50
		case 1:
			cut.UnsyncedDataPercent = 100
		}
		crashed := fs.CrashClone(cut)
		srv.Kill()
		fs = crashed
	}
}

// TestRefusedTokenIsNotRetried: a server that refuses the client's token
// ends the stream before reading a request, so Send may see io.EOF instead
// of the status; the Backend still reports the refusal on the one stream
// it opened, rather than retrying it as a broken stream (each retry opens
// a stream) until the budget runs out.
func TestRefusedTokenIsNotRetried(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{Token: "right", Logger: slog.New(slog.DiscardHandler)}, "")
	conn, err := rpc.Dial(ctx, srv.Addr, rpc.DialOptions{Token: "right", RetryBudget: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var streams atomic.Int64
	count := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		streams.Add(1)
		return streamer(ctx, desc, cc, method, opts...)
	}
	raw, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithStreamInterceptor(count))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn.Oracle = rpcpb.NewOracleClient(raw) // the same server, no token
	for i := range 50 {
		b := remote.New(conn)
		before := streams.Load()
		_, err := b.Allocate(ctx, 1)
		if opened := streams.Load() - before; !errors.Is(err, rpc.ErrUnauthenticated) || opened != 1 {
			t.Fatalf("call %d: %v after opening %d streams, want rpc.ErrUnauthenticated on the first", i, err, opened)
		}
		b.Close()
	}
}
