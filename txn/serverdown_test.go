package txn_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// hang bounds a wait only a hang reaches: every budget in these tests is
// at most a few seconds, or an hour where the test checks it is not used.
const hang = 30 * time.Second

// downRig is a client whose store is reached through a fault proxy, and
// whose oracle is not (the oracle's faults are not the point here).
type downRig struct {
	proxy  *faultproxy.Proxy
	client *txn.Client
}

// newDownRig starts a server and a client of it through a proxy; with
// ops, the client's operations are rpc operations (rpc.WithOperation),
// as a DB's over a server are.
func newDownRig(t *testing.T, dial rpc.DialOptions, ops bool) *downRig {
	t.Helper()
	return newDownRigWith(t, dial, ops, txn.Options{})
}

// newDownRigWith is newDownRig whose client also has with's AsyncCommit.
func newDownRigWith(t *testing.T, dial rpc.DialOptions, ops bool, with txn.Options) *downRig {
	t.Helper()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.SetBlackhole(false); p.Close() })
	st := servertest.Store(t, servertest.Dial(t, p.Addr(), dial), remote.Options{})
	orc := oracleremote.NewClient(servertest.Dial(t, srv.Addr, rpc.DialOptions{}))
	opts := txn.Options{Logger: quiet, LockTTL: time.Second, AsyncCommit: with.AsyncCommit}
	if ops {
		opts.Operation = rpc.WithOperation
	}
	c, err := txn.NewClient(context.Background(), st, orc, coord.TTLOnly{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &downRig{proxy: p, client: c}
}

// commitTwoRows commits a transaction writing rows a and b, with hook as
// the commit's crash hook, and returns Commit's error; a commit that does
// not return within hang fails the test.
func (r *downRig) commitTwoRows(t *testing.T, ctx context.Context, hook func(point string) bool) error {
	t.Helper()
	txn.SetCrashHook(r.client, hook)
	tx, err := r.client.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"a", "b"} {
		if err := tx.Set(row, "c", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- tx.Commit(ctx) }()
	select {
	case err := <-done:
		t.Logf("Commit returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
		return err
	case <-time.After(hang):
		t.Fatalf("Commit did not return within %v", hang)
		return nil
	}
}

// checkAtomic reads rows a and b once the proxy passes again: both hold
// the value or neither does.
func (r *downRig) checkAtomic(t *testing.T) {
	t.Helper()
	r.proxy.SetBlackhole(false)
	r.proxy.SetRefuse(false)
	start := time.Now()
	defer func() { t.Logf("checked after %v", time.Since(start).Round(time.Millisecond)) }()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	tx, err := r.client.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found []bool
	for _, row := range []string{"a", "b"} {
		_, err := tx.Get(ctx, row, "c")
		if err != nil && !errors.Is(err, txn.ErrNotFound) {
			t.Fatalf("reading %s after the fault: %v", row, err)
		}
		found = append(found, err == nil)
	}
	if found[0] != found[1] {
		t.Fatalf("half a transaction: a found %v, b found %v", found[0], found[1])
	}
}

// bothWays runs f with the client's own cleanup bound alone (the store's
// calls have budgets of an hour: only txn's CleanupTimeout can end them),
// and with rpc operations, which bound the cleanup too.
func bothWays(t *testing.T, f func(t *testing.T, ops bool)) {
	t.Run("txn's cleanup timeout", func(t *testing.T) { f(t, false) })
	t.Run("rpc operations", func(t *testing.T) { f(t, true) })
}

// A commit cancelled at its commit point, with the server unreachable
// (blackholed) and budgets of an hour, returns within its cleanup time
// (1s) with ErrCommitUnknown: it used to finish the commit point under
// context.WithoutCancel for the whole retry budget, each call of it.
func TestCommitPointCancelledWithServerDown(t *testing.T) {
	bothWays(t, func(t *testing.T, ops bool) {
		r := newDownRig(t, rpc.DialOptions{CallTimeout: time.Hour, RetryBudget: time.Hour}, ops)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := r.commitTwoRows(t, ctx, func(point string) bool {
			if point == txn.CrashAfterSessionCheck {
				r.proxy.SetBlackhole(true)
				cancel()
			}
			return false
		})
		if !errors.Is(err, txn.ErrCommitUnknown) {
			t.Fatalf("Commit cancelled at its commit point with the server unreachable: %v, want ErrCommitUnknown", err)
		}
		r.checkAtomic(t)
	})
}

// A commit cancelled between its prewrites, with the server unreachable,
// rolls back for at most its cleanup time and returns the cancellation:
// the rollback used to run under context.WithoutCancel for the whole retry
// budget.
func TestAbortCancelledWithServerDown(t *testing.T) {
	bothWays(t, func(t *testing.T, ops bool) {
		r := newDownRig(t, rpc.DialOptions{CallTimeout: time.Hour, RetryBudget: time.Hour}, ops)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := r.commitTwoRows(t, ctx, func(point string) bool {
			if point == txn.CrashAfterPrimaryPrewrite {
				r.proxy.SetBlackhole(true)
				cancel()
			}
			return false
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit cancelled between its prewrites with the server unreachable: %v, want context.Canceled", err)
		}
		r.checkAtomic(t)
	})
}

// With the server gone for good (a blackhole: TCP stays open) a commit
// fails within its retry budget as a whole, abort included, with
// ErrUnavailable naming the server, and commits nothing; one that loses
// the server at its commit point says ErrCommitUnknown. A read fails the
// same way. (The call timeout is an hour: only the budget can end them.)
func TestCommitServerStaysDown(t *testing.T) {
	dial := rpc.DialOptions{CallTimeout: time.Hour, RetryBudget: time.Second}
	t.Run("before the prewrites", func(t *testing.T) {
		r := newDownRig(t, dial, true)
		r.proxy.SetBlackhole(true)
		err := r.commitTwoRows(t, context.Background(), func(string) bool { return false })
		if !errors.Is(err, rpc.ErrUnavailable) || errors.Is(err, txn.ErrCommitUnknown) || !strings.Contains(err.Error(), r.proxy.Addr()) {
			t.Fatalf("Commit with the server gone: %v, want ErrUnavailable naming %s", err, r.proxy.Addr())
		}
		tx, err := r.client.BeginReadOnly(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := tx.Get(context.Background(), "a", "c"); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, rpc.ErrUnavailable) {
				t.Fatalf("Get with the server gone: %v, want ErrUnavailable", err)
			}
		case <-time.After(hang):
			t.Fatal("Get with the server gone did not return")
		}
		r.checkAtomic(t)
	})
	t.Run("at the commit point", func(t *testing.T) {
		r := newDownRig(t, dial, true)
		err := r.commitTwoRows(t, context.Background(), func(point string) bool {
			if point == txn.CrashAfterSessionCheck {
				r.proxy.SetBlackhole(true)
			}
			return false
		})
		if !errors.Is(err, txn.ErrCommitUnknown) {
			t.Fatalf("Commit losing the server at its commit point: %v, want ErrCommitUnknown", err)
		}
		r.checkAtomic(t)
	})
}

// An async commit whose server is gone for good (a blackhole) fails
// within its retry budget with ErrCommitUnknown: its prewrite call is its
// commit, which may have reached the server, and the rollback record
// that would settle it cannot be written either. Once the server is back
// the transaction is whole or absent.
func TestAsyncCommitServerStaysDown(t *testing.T) {
	r := newDownRigWith(t, rpc.DialOptions{CallTimeout: time.Hour, RetryBudget: time.Second}, true, txn.Options{AsyncCommit: true})
	r.proxy.SetBlackhole(true)
	err := r.commitTwoRows(t, context.Background(), func(string) bool { return false })
	if !errors.Is(err, txn.ErrCommitUnknown) || !errors.Is(err, rpc.ErrUnavailable) {
		t.Fatalf("an async commit with the server gone: %v, want ErrCommitUnknown and ErrUnavailable", err)
	}
	r.checkAtomic(t)
}
