package observer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// TestCollectProcessedDelete: the garbage collector keeps an observed
// column's newest delete record while an observer has not processed it
// (its removal would make the delete look clean to the dirty check, and
// the observer would never run on it), and removes it once every strong
// observer's ack is past it; the observers then find nothing to do.
func TestCollectProcessedDelete(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{})
	var strong atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "copy", Column: "in", Fn: copyTo("out", &strong)}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "in", "1")
	e.drain(1)
	e.update(func(tx *txn.Txn) error { return tx.Delete("r", "in") })
	records := func() int {
		t.Helper()
		row, err := e.store.ReadRow(ctx, []byte("r"), storage.Filter{{Family: txn.FamilyWrite, Qualifier: "in"}})
		if err != nil {
			t.Fatal(err)
		}
		return len(row.Cells)
	}
	collect := func() {
		t.Helper()
		tx, err := e.client.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := txn.AdvanceSafePoint(ctx, e.store, tx.StartTS())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := e.client.CollectBelow(ctx, sp, nil); err != nil {
			t.Fatal(err)
		}
	}
	collect()
	if n := records(); n != 1 {
		t.Fatalf("before the observer ran: %d write records of the observed column, want the delete's", n)
	}
	strong.Store(0)
	e.drain(1)
	if strong.Load() != 1 || e.get("r", "out") != "<none>" {
		t.Fatalf("the observer ran %d times on the delete, out = %q", strong.Load(), e.get("r", "out"))
	}
	collect()
	if n := records(); n != 0 {
		t.Fatalf("after every ack passed the delete: %d write records, want none", n)
	}
	strong.Store(0)
	e.set("r", "other", "x") // a change elsewhere in the row
	e.drain(1)
	if strong.Load() != 0 {
		t.Fatalf("the observer ran %d times after the collection, want 0", strong.Load())
	}
}
