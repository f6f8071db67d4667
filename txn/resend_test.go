package txn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
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

// failCommits is a memory store on which every primary commit call (a
// durable CheckAndMutateCond writing a commit record) fails without
// applying, as calls timing out before they reach the store.
type failCommits struct{ *memory.Store }

func (f failCommits) CheckAndMutateCond(ctx context.Context, row []byte, cond storage.Cond, pred storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	if !deferred && len(ifTrue) > 0 && ifTrue[0].Family == FamilyWrite {
		return false, errInjectedTimeout
	}
	return f.Store.CheckAndMutateCond(ctx, row, cond, pred, ifTrue, ifFalse, deferred)
}

// TestOwnRollbackNotBlamedOnOthers: when the commit call fails and the
// committer rolls its own primary back, the conflict says so, instead of
// blaming "another client".
func TestOwnRollbackNotBlamedOnOthers(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	c, err := NewClient(ctx, failCommits{mem}, &counterOracle{}, coord.NewLocal(), Options{Owner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tx, _ := c.Begin(ctx)
	_ = tx.Set("r", "v", []byte("x"))
	err = tx.Commit(ctx)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("commit = %v, want a conflict (own rollback)", err)
	}
	if strings.Contains(ce.Reason, "another client") || !strings.Contains(ce.Reason, "rolled back") {
		t.Fatalf("reason %q: want our own rollback, not another client's", ce.Reason)
	}
	if n := countLocks(t, mem); n != 0 {
		t.Fatalf("%d locks left", n)
	}
}

// TestCommitMutationOrder: every call that commits or rolls back a cell
// writes its write record before it removes the lock. The index applies
// them in that order in separate critical sections, and a reader between
// the two must see the lock (and resolve it) rather than neither lock nor
// new commit (index.go, argument 2): the test checks the builders, and that
// an index that applied only the first half shows both.
func TestCommitMutationOrder(t *testing.T) {
	c := &Client{opts: Options{InlineSize: 16}}
	tx := &Txn{startTS: 5}
	rw := &rowWrites{row: []byte("r"), muts: []*mutation{{row: []byte("r"), col: "a", op: OpPut, value: []byte("v")}, {row: []byte("r"), col: "b", op: OpDelete}}}
	lock := Lock{Op: OpPut, Inline: true, Value: []byte("v")}
	for name, muts := range map[string][]storage.Mutation{
		"commit":       c.commitMutations(tx, rw, 9),
		"roll forward": rollForwardMutations("a", 5, 9, &lock),
		"roll back":    rollbackMutations("a", 5),
	} {
		seenWrite := map[string]bool{}
		for _, m := range muts {
			switch {
			case m.Family == FamilyWrite && m.Kind == storage.Put:
				seenWrite[m.Qualifier] = true
			case m.Family == FamilyLock && m.Kind == storage.DeleteCells && !seenWrite[m.Qualifier]:
				t.Errorf("%s removes the lock of %s before writing its write record", name, m.Qualifier)
			}
		}
	}
	ix := newCellIndex(1, 0)
	ix.offerBase(1)
	ix.apply([]byte("r"), []storage.Mutation{storage.SetCell(FamilyLock, "a", 5, nil)})
	muts := c.commitMutations(tx, rw, 9)
	ix.apply([]byte("r"), muts[:1]) // the reader looks between the two halves
	v := ix.view([]byte("r"), "a", 10)
	if len(v.lockTS) != 1 || !v.known || v.latest != 9 {
		t.Fatalf("between write record and lock removal the index shows locks %v, latest %d (known %v): want the lock and commit 9", v.lockTS, v.latest, v.known)
	}
}

// TestUntilSettledHonoursContext: a read step that keeps asking to be
// retried at once (a lock the store has dropped but the index still
// shows) is retried a few times, then backed off, and gives up when its
// context ends instead of spinning.
func TestUntilSettledHonoursContext(t *testing.T) {
	c := &Client{sleep: ctxwait.Sleep, opts: Options{Rand: func(n int64) int64 { return n / 2 }}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	steps := 0
	err := c.untilSettled(ctx, func() error { steps++; return errRetryNow })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("untilSettled = %v, want the context's deadline", err)
	}
	if steps > 200 {
		t.Fatalf("%d steps in 50ms: a busy spin, not a back-off", steps)
	}
	t.Logf("%d steps", steps)
}

// rollbackCalls records the blind writes a client sends (Mutate and
// MutateRows: the rollbacks, in a test with no commit): the rows of each
// call, in order.
type rollbackCalls struct {
	storage.Store
	mu    sync.Mutex
	calls [][]string
}

func (s *rollbackCalls) record(rows ...[]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := make([]string, len(rows))
	for i, r := range rows {
		call[i] = string(r)
	}
	s.calls = append(s.calls, call)
}

func (s *rollbackCalls) Mutate(ctx context.Context, row []byte, muts ...storage.Mutation) error {
	s.record(row)
	return s.Store.Mutate(ctx, row, muts...)
}

func (s *rollbackCalls) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	keys := make([][]byte, len(rows))
	for i := range rows {
		keys[i] = rows[i].Row
	}
	s.record(keys...)
	return s.Store.(storage.Batcher).MutateRows(ctx, rows)
}

// TestAbortRollsBackPrimaryFirstThenBatches: a transaction of six rows
// that meets a conflict on one rolls back the primary's row alone, first,
// and then the other five in one batch; no lock of it is left, and every
// row it wrote has its rollback record.
func TestAbortRollsBackPrimaryFirstThenBatches(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	st := &rollbackCalls{Store: mem}
	oracle := &counterOracle{}
	c, err := NewClient(ctx, st, oracle, coord.NewLocal(), Options{Owner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, err := NewClient(ctx, mem, oracle, coord.NewLocal(), Options{Owner: "B"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows := []string{"p", "s1", "s2", "s3", "s4", "s5"}
	for _, r := range rows {
		if err := tx.Set(r, "v", []byte("a")); err != nil {
			t.Fatal(err)
		}
	}
	// A commit to s3 after tx's start: its prewrite there conflicts.
	o, _ := other.Begin(ctx)
	_ = o.Set("s3", "v", []byte("b"))
	if err := o.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit = %v, want a conflict", err)
	}
	st.mu.Lock()
	calls := st.calls
	st.mu.Unlock()
	if len(calls) != 2 || strings.Join(calls[0], ",") != "p" || len(calls[1]) != 5 {
		t.Fatalf("rollback calls %q, want the primary's row alone and then the five others in one", calls)
	}
	if n := countLocks(t, mem); n != 0 {
		t.Fatalf("%d locks left", n)
	}
	for _, r := range rows {
		cells, err := mem.ReadRow(ctx, []byte(r), storage.Filter{{Family: FamilyWrite, Qualifier: "v", Time: storage.At(tx.StartTS())}})
		if err != nil || len(cells.Cells) != 1 {
			t.Errorf("row %s: %v %v, want its rollback record", r, cells, err)
		}
	}
}
