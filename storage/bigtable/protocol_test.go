package bigtable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/txn"
)

// counter is an oracle handing out next+1, next+2, ...
type counter struct{ next atomic.Uint64 }

func (c *counter) Timestamp(context.Context) (uint64, error) { return c.next.Add(1), nil }

func newClient(t *testing.T, s storage.Store, o txn.Oracle, owner string, live *coord.Local) *txn.Client {
	t.Helper()
	live.Register(owner)
	c, err := txn.NewClient(context.Background(), s, o, live, txn.Options{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSubMillisecondTimestamps: transactions whose timestamps differ only
// in the last three digits (one Bigtable millisecond) never collide: a
// write-write conflict between start 5001 and 5002 is seen, a snapshot at
// 5002 does not see a commit at 5003, and one at 5004 does. Stored at
// Bigtable's millisecond granularity without ×1000, all of them would be
// one cell time.
func TestSubMillisecondTimestamps(t *testing.T) {
	ctx := context.Background()
	s := bttesting.Open(t, bttesting.Start(t), "ms")
	o := &counter{}
	o.next.Store(5000)
	live := coord.NewLocal()
	c := newClient(t, s, o, "w", live)

	t1, _ := c.Begin(ctx) // 5001
	t2, _ := c.Begin(ctx) // 5002
	_ = t1.Set("row", "col", []byte("one"))
	_ = t2.Set("row", "col", []byte("two"))
	if err := t1.Commit(ctx); err != nil { // commit 5003
		t.Fatal(err)
	}
	if err := t2.Commit(ctx); !errors.Is(err, txn.ErrConflict) {
		t.Fatalf("second writer of one cell a millisecond apart: %v, want a conflict", err)
	}
	o.next.Store(5001) // a reader whose snapshot is 5002, below the commit
	old, _ := c.BeginReadOnly(ctx)
	if _, err := old.Get(ctx, "row", "col"); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("snapshot 5002 sees the commit at 5003: %v", err)
	}
	o.next.Store(5003)
	now, _ := c.BeginReadOnly(ctx) // 5004
	if v, err := now.Get(ctx, "row", "col"); err != nil || string(v) != "one" {
		t.Fatalf("snapshot 5004 = %q, %v; want one", v, err)
	}
	r, err := s.ReadRow(ctx, []byte("row"), storage.Filter{{Family: txn.FamilyWrite, AllQualifiers: true}})
	if err != nil || len(r.Cells) != 2 || r.Cells[0].TS != 5003 || r.Cells[1].TS != 5002 {
		t.Fatalf("write records: %+v, %v; want the commit at 5003 and the rollback of 5002", r.Cells, err)
	}
}

// appliedThenUnavailable applies CheckAndMutateRow calls and, while left
// > 0, answers every other one Unavailable, as a Bigtable whose reply was
// lost (so each call's first send is lost and its re-send answered).
type appliedThenUnavailable struct {
	mu       sync.Mutex
	left     int
	injected int
	skip     bool
}

func (a *appliedThenUnavailable) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil || !strings.HasSuffix(info.FullMethod, "/CheckAndMutateRow") {
		return resp, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.left == 0 {
		return resp, err
	}
	if a.skip = !a.skip; !a.skip {
		return resp, err
	}
	a.left--
	a.injected++
	return nil, status.Error(codes.Unavailable, "injected: applied, reply lost")
}

// TestAppliedThenUnavailable: every protocol CheckAndMutateRow (prewrite,
// commit) is applied and then fails with a retryable error; the backend
// re-sends it (CheckAndMutateIdempotent) and the protocol's idempotence
// (DESIGN invariant 6) makes the duplicate harmless: every transfer
// commits once, totals are conserved, no lock is left. A plain
// CheckAndMutate, which nothing vouches for, is not re-sent: its error
// reaches the caller.
func TestAppliedThenUnavailable(t *testing.T) {
	ctx := context.Background()
	fault := &appliedThenUnavailable{}
	s := bttesting.Open(t, bttesting.Start(t, fault.intercept), "faults")
	o := &counter{}
	live := coord.NewLocal()
	c := newClient(t, s, o, "w", live)

	init, _ := c.Begin(ctx)
	for i := range 4 {
		_ = init.Set(fmt.Sprintf("acct%d", i), "bal", []byte("100"))
	}
	if err := init.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fault.mu.Lock()
	fault.left = 1 << 30
	fault.mu.Unlock()
	for i := range 6 {
		from, to := fmt.Sprintf("acct%d", i%4), fmt.Sprintf("acct%d", (i+1)%4)
		tx, _ := c.Begin(ctx)
		a, err1 := tx.Get(ctx, from, "bal")
		b, err2 := tx.Get(ctx, to, "bal")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		_ = tx.Set(from, "bal", []byte(fmt.Sprint(atoi(a)-10)))
		_ = tx.Set(to, "bal", []byte(fmt.Sprint(atoi(b)+10)))
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
	}
	fault.mu.Lock()
	injected := fault.injected
	fault.left = 0
	fault.mu.Unlock()
	if injected < 12 {
		t.Fatalf("only %d faults injected", injected)
	}
	rd, _ := c.BeginReadOnly(ctx)
	total := 0
	for i := range 4 {
		v, err := rd.Get(ctx, fmt.Sprintf("acct%d", i), "bal")
		if err != nil {
			t.Fatal(err)
		}
		total += atoi(v)
	}
	if total != 400 {
		t.Fatalf("total %d after transfers through lost replies, want 400", total)
	}
	n := 0
	if err := s.Scan(ctx, nil, nil, storage.Filter{{Family: txn.FamilyLock, AllQualifiers: true}}, 0, func(storage.Row) bool { n++; return true }); err != nil || n != 0 {
		t.Fatalf("%d rows with locks left (%v)", n, err)
	}

	fault.mu.Lock()
	fault.left, fault.skip = 1, false
	fault.mu.Unlock()
	_, err := s.CheckAndMutate(ctx, []byte("plain"), nil, nil, []storage.Mutation{storage.SetCell("a", "q", 1, []byte("v"))})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("plain CheckAndMutate after a lost reply: %v, want the Unavailable error", err)
	}
	_ = bigtable.MaxTimestamp
}

func atoi(b []byte) int {
	n := 0
	fmt.Sscan(string(b), &n)
	return n
}
