package percolator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// TestServerTour runs the API over a server: two DBs (as two processes
// would) share its store, oracle and lock service.
func TestServerTour(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{}, "")
	a := open(t, percolator.Options{Server: srv.Addr})
	b := open(t, percolator.Options{Server: srv.Addr})
	if err := a.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("Bob", "v", []byte("10")) }); err != nil {
		t.Fatal(err)
	}
	if got := get(t, b, "Bob"); got != "10" {
		t.Fatalf("b reads %q", got)
	}
	// A conflict between the two.
	ta, _ := a.Begin(ctx)
	tb, _ := b.Begin(ctx)
	_ = ta.Set("Bob", "v", []byte("1"))
	_ = tb.Set("Bob", "v", []byte("2"))
	errA, errB := ta.Commit(ctx), tb.Commit(ctx)
	if (errA == nil) == (errB == nil) || !errors.Is(errors.Join(errA, errB), percolator.ErrConflict) {
		t.Fatalf("two writers of one cell: %v, %v", errA, errB)
	}
	if _, err := percolator.Open(ctx, percolator.Options{Server: srv.Addr, Dir: t.TempDir()}); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("Server with Dir: %v", err)
	}
}

// TestServerDialOptions: the DialOptions of a DB on a server apply to its
// connections: an interceptor sees the calls of a write transaction; and
// without Server they are refused.
func TestServerDialOptions(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{}, "")
	var mu sync.Mutex
	var calls []string
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		calls = append(calls, method)
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	db := open(t, percolator.Options{Server: srv.Addr, DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
	mu.Lock()
	calls = nil
	mu.Unlock()
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("Bob", "v", []byte("10")) }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(calls)
	mu.Unlock()
	if n == 0 {
		t.Fatal("the interceptor saw no call of a write transaction")
	}
	if _, err := percolator.Open(ctx, percolator.Options{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}}); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("DialOptions without Server: %v", err)
	}
}

// TestServerBank: DBs on one server move money concurrently; the total
// is conserved and every lock is resolved.
func TestServerBank(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{}, "")
	const accounts, clients, each = 20, 3, 40
	dbs := make([]*percolator.DB, clients)
	for i := range dbs {
		dbs[i] = open(t, percolator.Options{Server: srv.Addr})
	}
	err := dbs[0].Update(ctx, func(tx *percolator.Txn) error {
		for i := range accounts {
			if err := tx.Set(fmt.Sprint("acct", i), "bal", []byte("100")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for c, db := range dbs {
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), uint64(w)))
				for range each {
					from, to := fmt.Sprint("acct", rng.IntN(accounts)), fmt.Sprint("acct", rng.IntN(accounts))
					if from == to {
						continue
					}
					err := db.Update(ctx, func(tx *percolator.Txn) error {
						fv, err := tx.Get(ctx, from, "bal")
						if err != nil {
							return err
						}
						tv, err := tx.Get(ctx, to, "bal")
						if err != nil {
							return err
						}
						f, _ := strconv.Atoi(string(fv))
						g, _ := strconv.Atoi(string(tv))
						_ = tx.Set(from, "bal", []byte(strconv.Itoa(f-1)))
						return tx.Set(to, "bal", []byte(strconv.Itoa(g+1)))
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	total := 0
	err = dbs[1].View(ctx, func(tx *percolator.Txn) error {
		for i := range accounts {
			v, err := tx.Get(ctx, fmt.Sprint("acct", i), "bal")
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(string(v))
			total += n
		}
		return nil
	})
	if err != nil || total != accounts*100 {
		t.Fatalf("total %d, %v", total, err)
	}
	if locks, err := dbs[2].Locks(ctx); err != nil || len(locks) != 0 {
		t.Fatalf("locks left: %v, %v", locks, err)
	}
}

// TestServerObserversAcrossProcesses: an observer registered in one DB is
// notified of writes committed by another DB that opened before the
// registration.
func TestServerObserversAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{}, "")
	writer := open(t, percolator.Options{Server: srv.Addr})
	if err := writer.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("warm", "text", []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	watcher := open(t, percolator.Options{Server: srv.Addr})
	upper := func(ctx context.Context, tx *percolator.Txn, row, col string) error {
		v, err := tx.Get(ctx, row, col)
		if err != nil {
			return err
		}
		return tx.Set(row, "upper", bytes.ToUpper(v))
	}
	if err := watcher.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := writer.Update(ctx, func(tx *percolator.Txn) error {
			return tx.Set(fmt.Sprint("doc", i), "text", []byte(fmt.Sprint("hello ", i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := watcher.RunWorkers(rctx, percolator.WorkerOptions{Scanners: 2, Drain: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		err := writer.View(ctx, func(tx *percolator.Txn) error {
			v, err := tx.Get(ctx, fmt.Sprint("doc", i), "upper")
			if err == nil && string(v) != fmt.Sprint("HELLO ", i) {
				err = fmt.Errorf("upper = %q", v)
			}
			return err
		})
		if err != nil {
			t.Fatalf("doc%d: %v", i, err)
		}
	}
}
