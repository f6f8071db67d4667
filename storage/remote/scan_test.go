package remote_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// scanRows is how many rows the scan tests write.
const scanRows = 1500

// proxiedStore writes scanRows rows of value bytes each to a fresh
// server and returns a store dialed to it through a fault proxy, with the
// given retry budget.
func proxiedStore(t *testing.T, budget time.Duration, value int) (*remote.Store, *faultproxy.Proxy) {
	t.Helper()
	srv := servertest.Start(t, server.Options{}, "")
	direct := servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	v := []byte(strings.Repeat("v", value))
	for start := 0; start < scanRows; start += 100 {
		rows := make([]storage.RowMutation, 0, 100)
		for i := start; i < min(start+100, scanRows); i++ {
			rows = append(rows, storage.RowMutation{Row: scanKey(i), Mutations: []storage.Mutation{storage.SetCell("f", "q", 1, v)}})
		}
		if errs, err := direct.MutateRows(context.Background(), rows); err != nil || errors.Join(errs...) != nil {
			t.Fatalf("writing the rows: %v %v", err, errs)
		}
	}
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := servertest.Dial(t, p.Addr(), rpc.DialOptions{RetryBudget: budget, CallTimeout: time.Hour})
	return servertest.Store(t, conn, remote.Options{NoNonces: true}), p
}

func scanKey(i int) []byte { return fmt.Appendf(nil, "row%05d", i) }

var scanFilter = storage.Filter{{Family: "f", AllQualifiers: true}}

// A Scan that keeps receiving rows is resumed after every break, however
// long it has streamed: its retry budget counts from the last message, not
// from the call's start. The consumer cuts every connection of the proxy
// every 100 rows and takes a quarter of the budget over each cut (14
// breaks: the scan lasts several budgets). Every row arrives once, in
// order.
func TestScanResumedPastBudget(t *testing.T) {
	const budget = 300 * time.Millisecond
	st, p := proxiedStore(t, budget, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next, cuts, start := 0, 0, time.Now()
	err := st.Scan(ctx, nil, nil, scanFilter, 0, func(r storage.Row) bool {
		if want := scanKey(next); string(r.Key) != string(want) {
			t.Fatalf("row %q after %d rows, want %q", r.Key, next, want)
		}
		next++
		if next%100 == 0 && next < scanRows {
			p.Cut()
			cuts++
			time.Sleep(budget / 4)
		}
		return true
	})
	if err != nil {
		t.Fatalf("scan over %v with %d breaks, after %d rows: %v", time.Since(start).Round(time.Millisecond), cuts, next, err)
	}
	if next != scanRows {
		t.Fatalf("scan returned %d rows, want %d", next, scanRows)
	}
	t.Logf("%d rows over %v with %d breaks (budget %v)", next, time.Since(start).Round(time.Millisecond), cuts, budget)
}

// A Scan whose stream goes quiet (the connection blackholed mid-scan: TCP
// stays open, nothing comes back) is cut by its wait for the next message
// and fails within its retry budget from the last message received, with
// ErrUnavailable naming the server. The rows hold 24 MiB, more than gRPC's
// flow control lets the server send ahead of the reader (its window
// grows to 16 MiB at most), so that however fast the server is, the rest
// of the scan is still to come when the connection goes quiet.
func TestScanStalledFailsWithinBudget(t *testing.T) {
	const budget = 500 * time.Millisecond
	st, p := proxiedStore(t, budget, 16<<10)
	defer p.SetBlackhole(false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, start := 0, time.Now()
	err := st.Scan(ctx, nil, nil, scanFilter, 0, func(storage.Row) bool {
		if n++; n == 100 {
			p.SetBlackhole(true)
		}
		return true
	})
	if ctx.Err() != nil {
		t.Fatalf("a stalled scan ran until the test's minute was up: %v", err)
	}
	if !errors.Is(err, rpc.ErrUnavailable) || !strings.Contains(err.Error(), p.Addr()) {
		t.Fatalf("stalled scan: %v after %d rows; want ErrUnavailable naming %s", err, n, p.Addr())
	}
	t.Logf("stalled after %d rows, failed after %v: %v", n, time.Since(start).Round(time.Millisecond), err)
}
