package txn_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// callLog records the methods of a connection's unary calls but Ping
// (the safe point's sample, which a read refreshes now and then).
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if name := method[strings.LastIndex(method, "/")+1:]; name != "Ping" {
		l.mu.Lock()
		l.calls = append(l.calls, name)
		l.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (l *callLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

// TestPushCallsOverServer: a read through locks that meets a live
// transaction's lock, over a server, makes one call more than a read that
// meets none: the push, sent to the primary without reading its status
// first (the lock met says the transaction is alive, and a push that
// applies says its primary lock stands). A lock whose transaction has
// decided since costs the status read after the push that did not apply,
// and the read sees what it decided.
func TestPushCallsOverServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	log := &callLog{}
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{GRPC: []grpc.DialOption{grpc.WithChainUnaryInterceptor(log.unary)}})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	w := newClient(t, rs, orc, txn.Options{Logger: quiet})
	if err := writeRows(ctx, w, "old", "p", "s", "u"); err != nil {
		t.Fatal(err)
	}
	// A writer stopped just before its commit point: its locks stand at
	// p (the primary) and s, its owner alive for a minute.
	held := newClient(t, rs, orc, txn.Options{Logger: quiet, LockTTL: time.Minute, TwoPhaseOnly: true})
	txn.SetCrashHook(held, func(point string) bool { return point == txn.CrashAfterSessionCheck })
	if err := writeRows(ctx, held, "new", "p", "s"); err == nil {
		t.Fatal("the stopped transaction committed")
	}

	reader := newClient(t, rs, orc, txn.Options{Logger: quiet, ReadThroughLocks: true})
	read := func(row, want string) []string {
		t.Helper()
		rd, err := reader.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		log.take()
		v, err := rd.Get(ctx, row, "c")
		if err != nil || string(v) != want {
			t.Fatalf("Get(%s): %q, %v; want %q", row, v, err, want)
		}
		return log.take()
	}
	plain := read("u", "old")
	for _, row := range []string{"p", "s"} {
		pushed := read(row, "old")
		if len(pushed) != len(plain)+1 || !slices.Equal(pushed[:len(plain)], plain) {
			t.Errorf("a read of %s past a live lock made calls %v; a read of an unlocked cell %v: want one more", row, pushed, plain)
		}
	}
	if got := reader.Stats().Pushes; got != 2 {
		t.Errorf("Pushes = %d, want 2", got)
	}

	// The primary rolled back since, the secondary's lock still there:
	// the push finds no lock at the primary, the status says rolled
	// back, and the read rolls the lock back and reads past it.
	if err := rollBackHeld(ctx, rs, orc, "p"); err != nil {
		t.Fatal(err)
	}
	if calls := read("s", "old"); len(calls) <= len(plain)+1 {
		t.Errorf("a read of a lock whose primary rolled back made calls %v, want its resolution's too", calls)
	}
	if got := reader.Stats().Pushes; got != 2 {
		t.Errorf("Pushes = %d after the transaction rolled back, want still 2", got)
	}
	if calls := read("s", "old"); slices.Contains(calls, "CheckAndMutate") {
		t.Errorf("a read after the lock was resolved made calls %v, want reads only", calls)
	}
}

// writeRows commits v to column c of rows in one transaction, the first
// row its primary.
func writeRows(ctx context.Context, c *txn.Client, v string, rows ...string) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := tx.Set(r, "c", []byte(v)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// rollBackHeld rolls back the transaction whose primary is (row, c), as
// a reader that finds its owner gone does.
func rollBackHeld(ctx context.Context, st *remote.Store, orc txn.Oracle, row string) error {
	c, err := txn.NewClient(ctx, st, orc, deadOwners{}, txn.Options{Logger: quiet})
	if err != nil {
		return err
	}
	defer c.Close()
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = tx.Get(ctx, row, "c")
	return err
}

// deadOwners says every owner is gone.
type deadOwners struct{}

func (deadOwners) Alive(context.Context, string) (bool, error) { return false, nil }
