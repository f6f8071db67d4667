package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// holdFirstBatch is a memory store with all its capabilities whose first
// deferred batch (a secondary commit) is held back and reported as a
// timeout; release delivers it, late.
type holdFirstBatch struct {
	*memory.Store
	mu   sync.Mutex
	held func()
	done bool
}

func (h *holdFirstBatch) MutateRowsDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	h.mu.Lock()
	if !h.done {
		h.done = true
		h.held = func() { _, _ = h.Store.MutateRowsDeferred(context.WithoutCancel(ctx), rows) }
		h.mu.Unlock()
		return nil, errInjectedTimeout
	}
	h.mu.Unlock()
	return h.Store.MutateRowsDeferred(ctx, rows)
}

func (h *holdFirstBatch) release() {
	h.mu.Lock()
	held := h.held
	h.held = nil
	h.mu.Unlock()
	held()
}

// TestLateDuplicateCommit: a secondary commit re-sent after a timeout, whose
// first copy arrives after a newer commit of the cell and after the cell's
// latest-commit entry was dropped, must not make the index return the
// overwritten value (invariant 6, then 2 and 3): a snapshot read sees the
// newer value and a read-modify-write built on it loses no update.
func TestLateDuplicateCommit(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	st := &holdFirstBatch{Store: mem}
	c, err := NewClient(ctx, st, &counterOracle{}, coord.NewLocal(),
		Options{Owner: "A", LockTTL: time.Minute, IndexShards: 1, indexCap: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	write := func(kv ...string) {
		t.Helper()
		tx, _ := c.Begin(ctx)
		for i := 0; i < len(kv); i += 2 {
			_ = tx.Set(kv[i], "v", []byte(kv[i+1]))
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read := func(row string) string {
		t.Helper()
		tx, _ := c.BeginReadOnly(ctx)
		v, err := tx.Get(ctx, row, "v")
		if err != nil {
			t.Fatalf("Get %s: %v", row, err)
		}
		return string(v)
	}
	write("p", "1", "x", "1") // x's commit is the held batch, then re-sent
	write("x", "2")
	for i := range 8 { // reads of cells without an entry fill and drop the map
		tx, _ := c.BeginReadOnly(ctx)
		if _, err := tx.Get(ctx, fmt.Sprint("absent", i), "v"); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	st.release() // the first copy of x's old commit arrives now
	if got := read("x"); got != "2" {
		t.Fatalf("x = %q after a late duplicate of its old commit, want %q", got, "2")
	}
	tx, _ := c.Begin(ctx)
	v, _ := tx.Get(ctx, "x", "v")
	_ = tx.Set("x", "v", append(v, '+'))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read("x"); got != "2+" {
		t.Fatalf("read-modify-write after the duplicate gave %q, want %q (a lost update)", got, "2+")
	}
}
