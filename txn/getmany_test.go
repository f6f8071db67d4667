package txn_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// countReads counts a remote store's reads: ReadRow and ReadRows calls.
type countReads struct {
	*remote.Store
	rows, multi atomic.Int64
}

func (c *countReads) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	c.rows.Add(1)
	return c.Store.ReadRow(ctx, row, f)
}

func (c *countReads) ReadRows(ctx context.Context, reads []storage.RowRead) ([]storage.Row, error) {
	c.multi.Add(1)
	return c.Store.ReadRows(ctx, reads)
}

// TestGetMany over a server: the cells in one ReadRows; absent cells nil,
// empty values empty, the transaction's own writes its own; a cell locked
// by a transaction whose owner died is read again alone, after the lock is
// resolved, and holds what that transaction left (rolled back: the value
// before); a value in the data column is read on its own. Bad input reads
// nothing.
func TestGetMany(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	w := newClient(t, rs, orc, txn.Options{Logger: quiet, InlineSize: 4})
	tx, _ := w.Begin(ctx)
	for row, v := range map[string]string{"a": "1", "b": "", "big": "a value past the inline size", "locked": "old"} {
		if err := tx.Set(row, "c", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	staleLock(ctx, t, rs, orc, "locked")

	cr := &countReads{Store: rs}
	c := newClient(t, cr, orc, txn.Options{Logger: quiet, InlineSize: 4})
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set("own", "c", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete("a", "d"); err != nil {
		t.Fatal(err)
	}
	keys := []txn.CellKey{{Row: "a", Column: "c"}, {Row: "b", Column: "c"}, {Row: "none", Column: "c"},
		{Row: "own", Column: "c"}, {Row: "a", Column: "d"}, {Row: "locked", Column: "c"}, {Row: "big", Column: "c"}}
	cr.rows.Store(0)
	got, err := tx.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1", "", "<nil>", "mine", "<nil>", "old", "a value past the inline size"}
	for i, k := range keys {
		s := "<nil>"
		if got[i] != nil {
			s = string(got[i])
		}
		if s != want[i] {
			t.Errorf("%s/%s = %q, want %q", k.Row, k.Column, s, want[i])
		}
	}
	if n := cr.multi.Load(); n != 1 {
		t.Errorf("%d ReadRows calls, want 1", n)
	}
	t.Logf("ReadRow calls beside it (the lock's resolution, the data column): %d", cr.rows.Load())

	cr.multi.Store(0)
	if _, err := tx.GetMany(ctx, []txn.CellKey{{Row: "a", Column: "c"}, {Row: "", Column: "c"}}); !errors.Is(err, txn.ErrInvalidArgument) {
		t.Errorf("GetMany with an empty row: %v, want ErrInvalidArgument", err)
	}
	if n := cr.multi.Load(); n != 0 {
		t.Errorf("bad input made %d ReadRows calls, want none", n)
	}
	_ = tx.Rollback(ctx)
	if _, err := tx.GetMany(ctx, keys[:1]); !errors.Is(err, txn.ErrTxnFinished) {
		t.Errorf("GetMany after Rollback: %v, want ErrTxnFinished", err)
	}
}

// countPrewrites counts a remote store's prewrite calls: its deferred
// row checks with a predicate (the secondaries' commit records go as
// deferred checks without one).
type countPrewrites struct {
	*remote.Store
	calls atomic.Int64
}

func (c *countPrewrites) CheckAndMutateRowsDeferred(ctx context.Context, checks []storage.RowCheck) ([]bool, uint64, error) {
	if len(checks) > 0 && len(checks[0].Predicate) > 0 {
		c.calls.Add(1)
	}
	return c.Store.CheckAndMutateRowsDeferred(ctx, checks)
}

// TestLargeTransactionOverServer: a transaction of more rows than one
// prewrite call carries is prewritten in several calls (in one epoch),
// and its secondaries past what the commit point's call carries are
// committed after it; every row reads back.
func TestLargeTransactionOverServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	cp := &countPrewrites{Store: rs}
	c := newClient(t, cp, oracleremote.NewClient(conn), txn.Options{Logger: quiet})
	const rows = 1300 // three prewrite calls; the commit point carries 512 secondaries
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := tx.Set(fmt.Sprintf("row%05d", i), "c", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cp.calls.Load(); n != 3 {
		t.Errorf("%d prewrite calls for %d rows, want 3", n, rows)
	}
	tx, _ = c.BeginReadOnly(ctx)
	kvs, err := tx.Scan(ctx, "row", "rox", "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != rows {
		t.Fatalf("%d rows read back, want %d", len(kvs), rows)
	}
	for i, kv := range kvs {
		if string(kv.Value) != fmt.Sprint(i) {
			t.Fatalf("%s = %q, want %d", kv.Row, kv.Value, i)
		}
	}
	locks, err := c.Locks(ctx)
	if err != nil || len(locks) != 0 {
		t.Fatalf("locks left: %d, %v", len(locks), err)
	}
}
