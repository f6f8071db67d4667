package txn_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// TestAsyncOverServer: over a server, a two-row transaction commits in
// one call (the server's oracle stamps its locks), its records follow,
// and readers of another client read it whole; a conflict on one row
// rolls the other back. A commit built under a registry that moved
// before the server checked it applies nothing and commits in two
// phases, with its notification.
func TestAsyncOverServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stored atomic.Uint64
	stored.Store(2)
	srv := servertest.Start(t, server.Options{Logger: quiet,
		RegistryVersion: func(context.Context, storage.Store) (uint64, error) { return stored.Load(), nil }}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	c := newClient(t, rs, orc, txn.Options{Logger: quiet, AsyncCommit: true})
	commit := func(c *txn.Client, kv ...string) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(kv); i += 2 {
			_ = tx.Set(kv[i], "v", []byte(kv[i+1]))
		}
		return tx.Commit(ctx)
	}
	if err := commit(c, "a", "1", "b", "1"); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Async != 1 {
		t.Fatalf("stats %+v: want an async commit", s)
	}
	reader := newClient(t, rs, orc, txn.Options{Logger: quiet})
	read := func(row string) string {
		t.Helper()
		rd, _ := reader.BeginReadOnly(ctx)
		v, err := rd.Get(ctx, row, "v")
		if err != nil && !errors.Is(err, txn.ErrNotFound) {
			t.Fatal(err)
		}
		return string(v)
	}
	if a, b := read("a"), read("b"); a != "1" || b != "1" {
		t.Fatalf("a, b = %q, %q; want 1, 1", a, b)
	}
	txn.AwaitBackground(c)
	if locks, err := reader.Locks(ctx); err != nil || len(locks) != 0 {
		t.Fatalf("locks once the records are written: %v, %v", locks, err)
	}

	old, _ := c.Begin(ctx)
	if err := commit(c, "b", "2"); err != nil {
		t.Fatal(err)
	}
	_ = old.Set("a", "v", []byte("old"))
	_ = old.Set("b", "v", []byte("old"))
	var ce *txn.ConflictError
	if err := old.Commit(ctx); !errors.As(err, &ce) {
		t.Fatalf("an async commit under a newer write: %v; want a conflict", err)
	}
	if a, b := read("a"), read("b"); a != "1" || b != "2" {
		t.Fatalf("after the conflict a, b = %q, %q; want 1, 2", a, b)
	}

	c.SetObservers(&movingRegistry{})
	if err := commit(c, "x", "1", "y", "1"); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Async != 1 {
		t.Fatalf("stats %+v: want the commit under a moved registry in two phases", s)
	}
	if ns, err := c.Notifications().Read(ctx, []byte("x")); err != nil || len(ns) == 0 {
		t.Fatalf("the notification of the newly observed column: %v, %v; want one", ns, err)
	}
	c.SetObservers(staticRegistry{version: 2})
	if err := commit(c, "x", "2", "y", "2"); err != nil || c.Stats().Async != 2 {
		t.Fatalf("under an unchanged registry: %v, %+v; want an async commit", err, c.Stats())
	}
}

// TestAsyncPowerCut: over a server on a crashable filesystem, the
// client dies once its async prewrite call applied, before any commit
// record, and the server's power is cut at once: the commit, durable
// when the call returned, is there after the restart, whole, rolled
// forward by the readers; so it is when the power is cut after Commit
// returned and the commit records (answered before their log sync) were
// written: they are lost, the locks are not. With the client dead
// between two calls (its second row blocked by a dead transaction's
// lock), nothing of it is.
func TestAsyncPowerCut(t *testing.T) {
	for _, point := range []string{txn.CrashAfterAsyncPrewrite, txn.CrashBetweenAsync, "after the records"} {
		t.Run(point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := newRig(t)
			conn := servertest.Dial(t, r.addr(), rpc.DialOptions{RetryBudget: 20 * time.Second})
			rs := servertest.Store(t, conn, remote.Options{})
			orc := oracleremote.NewClient(conn)
			if point == txn.CrashBetweenAsync {
				dead := newClient(t, rs, orc, txn.Options{Logger: quiet, TwoPhaseOnly: true, LockTTL: time.Millisecond})
				txn.SetCrashHook(dead, func(p string) bool { return p == txn.CrashAfterPrimaryPrewrite })
				tx, _ := dead.Begin(ctx)
				_ = tx.Set("q", "c", []byte("dead"))
				_ = tx.Set("z", "c", []byte("dead"))
				if err := tx.Commit(ctx); err == nil {
					t.Fatal("the dead transaction committed")
				}
			}
			c := newClient(t, rs, orc, txn.Options{Logger: quiet, AsyncCommit: true, LockTTL: time.Second})
			txn.SetCrashHook(c, func(p string) bool {
				if p == point {
					r.powerCut()
					return true
				}
				return false
			})
			tx, _ := c.Begin(ctx)
			_ = tx.Set("p", "c", []byte("v1"))
			_ = tx.Set("q", "c", []byte("v1"))
			err := tx.Commit(ctx)
			if point == txn.CrashBetweenAsync && err == nil {
				t.Fatal("the crash hook did not run: no second async call")
			}
			if point == "after the records" {
				// The records, answered before their log sync, are lost
				// with the power: the locks are not.
				if err != nil {
					t.Fatal(err)
				}
				txn.AwaitBackground(c)
				r.powerCut()
			}
			want := "v1"
			if point == txn.CrashBetweenAsync {
				want = ""
			}
			reader := newClient(t, rs, orc, txn.Options{Logger: quiet})
			rd, _ := reader.BeginReadOnly(ctx)
			for _, row := range []string{"p", "q"} {
				v, err := rd.Get(ctx, row, "c")
				if err != nil && !errors.Is(err, txn.ErrNotFound) {
					t.Fatal(err)
				}
				if string(v) != want {
					t.Fatalf("%s/c after the power cut = %q; want %q", row, v, want)
				}
			}
			// (After the records, a durable write of the server's own may
			// have made them durable before the cut: the values are what
			// is checked there.)
			if point == txn.CrashAfterAsyncPrewrite {
				if s := reader.Stats(); s.AsyncResolved == 0 {
					t.Fatalf("reader stats %+v: want the locks rolled forward from their rows", s)
				}
			}
		})
	}
}

// TestAsyncReadDuringPrewrite: over a server, a reader whose snapshot is
// above an async prewrite's stamp, reading a row of it while the call is
// between its timestamp and its write (held in the server's registry
// check), finds the lock and reads the committed value: the server's
// lock index, which learns of the lock only once the write returns, is
// asked only after the read waited for the row's mark.
func TestAsyncReadDuringPrewrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var holding atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	srv := servertest.Start(t, server.Options{Logger: quiet,
		RegistryVersion: func(_ context.Context, st storage.Store) (uint64, error) {
			// The check under the latch reads through the latch view, the
			// oracle's reads the store itself.
			if _, store := st.(*pebble.Store); !store && holding.CompareAndSwap(true, false) {
				close(held)
				<-release
			}
			return 2, nil
		}}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	c := newClient(t, rs, orc, txn.Options{Logger: quiet, AsyncCommit: true})
	c.SetObservers(staticRegistry{version: 2})
	holding.Store(true)
	done := make(chan error, 1)
	go func() {
		tx, _ := c.Begin(ctx)
		_ = tx.Set("a", "v", []byte("new"))
		_ = tx.Set("b", "v", []byte("new"))
		done <- tx.Commit(ctx)
	}()
	<-held // the stamp is taken; the locks are not written yet
	reader := newClient(t, rs, orc, txn.Options{Logger: quiet})
	rd, err := reader.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		v, err := rd.Get(ctx, "b", "v")
		if err != nil {
			v = []byte(err.Error())
		}
		got <- string(v)
	}()
	// Time for the read to reach the server and wait on the row: on a
	// slow machine it may arrive after the release, and the test only
	// checks less.
	time.Sleep(100 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != "new" {
		t.Fatalf("b/v read during the prewrite at a snapshot above its stamp = %q; want new", v)
	}
}

// TestAsyncAgainstOlderServer: a server of an older build answers
// PrewriteAsync and CommitOnePhase with Unimplemented (here an
// interceptor answers for it): the client commits in two phases, and
// stops asking.
func TestAsyncAgainstOlderServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	older := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/PrewriteAsync") || strings.HasSuffix(method, "/CommitOnePhase") {
			return status.Errorf(codes.Unimplemented, "unknown method %s", method)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{GRPC: []grpc.DialOption{older}})
	rs := servertest.Store(t, conn, remote.Options{})
	c := newClient(t, rs, oracleremote.NewClient(conn), txn.Options{Logger: quiet, AsyncCommit: true})
	for range 2 {
		tx, _ := c.Begin(ctx)
		_ = tx.Set("a", "v", []byte("1"))
		_ = tx.Set("b", "v", []byte("1"))
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("a commit against an older server: %v; want it in two phases", err)
		}
		tx, _ = c.Begin(ctx)
		_ = tx.Set("a", "v", []byte("2"))
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("a one-row commit against an older server: %v; want it in two phases", err)
		}
	}
	if s := c.Stats(); s.Commits != 4 || s.Async != 0 || s.OnePhase != 0 || s.Conflicts != 0 {
		t.Fatalf("stats %+v: want four two-phase commits", s)
	}
}
