package txn

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// rowReads is what the reads of one row returned: calls, and cells.
type rowReads struct{ calls, cells int }

// countingStore is the memory store shared as on Bigtable (no index, no
// deferred writes) whose ReadRow and Scan count, per row, the calls and
// the cells they return. Embedding the shared store forwards its other
// methods and every capability it has. Safe for concurrent use.
type countingStore struct {
	storagetest.SharedStore
	mu   *sync.Mutex
	rows map[string]*rowReads
}

func newCountingStore(t *testing.T) countingStore {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	return countingStore{SharedStore: storagetest.SharedStore{Store: mem}, mu: new(sync.Mutex), rows: map[string]*rowReads{}}
}

func (s countingStore) count(row []byte, cells int, call bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rows[string(row)]
	if n == nil {
		n = &rowReads{}
		s.rows[string(row)] = n
	}
	n.cells += cells
	if call {
		n.calls++
	}
}

// take returns what the reads of row returned since the last take.
func (s countingStore) take(row string) rowReads {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rows[row]
	delete(s.rows, row)
	if n == nil {
		return rowReads{}
	}
	return *n
}

func (s countingStore) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	r, err := s.SharedStore.ReadRow(ctx, row, f)
	s.count(row, len(r.Cells), true)
	return r, err
}

func (s countingStore) Scan(ctx context.Context, start, end []byte, f storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := s.ScanCounted(ctx, start, end, f, limit, fn)
	return err
}

func (s countingStore) ScanCounted(ctx context.Context, start, end []byte, f storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	return s.SharedStore.ScanCounted(ctx, start, end, f, limit, func(r storage.Row) bool {
		s.count(r.Key, len(r.Cells), true)
		return fn(r)
	})
}

// rollBack leaves a rollback record on row/col: a transaction of client
// "loser" whose primary is row/col prewrites it, then conflicts on a cell
// client "winner" committed after its start, and rolls row/col back.
func rollBack(t *testing.T, e *env, row, col string) {
	t.Helper()
	ctx := context.Background()
	loser, err := e.client("loser").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commitValue(t, e, "winner", "conflict", "v", "x")
	_ = loser.Set(row, col, []byte("rolled back"))
	_ = loser.Set("conflict", "v", []byte("y"))
	if err := loser.Commit(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("a commit meant to conflict returned %v", err)
	}
	if w, err := DecodeWrite(writeRecords(t, e, row, col)[0].Value); err != nil || w.Op != OpRollback || w.StartTS != loser.StartTS() {
		t.Fatalf("the newest record of %s/%s: %+v, %v; want the rollback of %d", row, col, w, err, loser.StartTS())
	}
}

// TestReadFetchesNoMoreThanNeeded: on a store shared as Bigtable is, a
// read of a cell returns from the store only the newest write record
// below its snapshot (and the lock check's cells: none here), in one
// call, however long the cell's history of values, rollback records and
// lock-only records; a scan returns one record per row. A cell whose
// newest records are rollback or lock-only ones costs the pages that
// pass them: fewer than twice the records the read needs, in about
// log2 of their number calls.
func TestReadFetchesNoMoreThanNeeded(t *testing.T) {
	ctx := context.Background()
	st := newCountingStore(t)
	e := newEnvOn(t, st, false)
	for _, name := range []string{"w", "loser", "winner"} {
		e.client(name).opts.InlineSize = 4 << 10 // values inline in their records, as by default
	}
	commitValue(t, e, "w", "fresh", "v", "f")
	for i := range 4 {
		commitValue(t, e, "w", "h", "v", fmt.Sprint(i))
		rollBack(t, e, "h", "v")
		commitForUpdate(t, e, "w", "h/v", "other/v")
	}
	commitValue(t, e, "w", "h", "v", "last")
	if n := len(writeRecords(t, e, "h", "v")); n != 13 {
		t.Fatalf("h/v has %d write records, want 13", n)
	}
	tx, _ := e.client("r").BeginReadOnly(ctx)
	for row, want := range map[string]string{"fresh": "f", "h": "last"} {
		st.take(row)
		if v, err := tx.Get(ctx, row, "v"); err != nil || string(v) != want {
			t.Fatalf("Get %s = %q, %v; want %q", row, v, err, want)
		}
		if got := st.take(row); got != (rowReads{calls: 1, cells: 1}) {
			t.Errorf("a read of %s returned %d cells in %d calls, want the newest write record in one call", row, got.cells, got.calls)
		}
	}
	if _, err := CommitTS(ctx, tx, "h", "v"); err != nil {
		t.Fatal(err)
	}
	if got := st.take("h"); got != (rowReads{calls: 1, cells: 1}) {
		t.Errorf("CommitTS of h returned %d cells in %d calls, want 1 in 1", got.cells, got.calls)
	}
	kvs, err := tx.Scan(ctx, "h", "h\x00", "v", 0)
	if err != nil || len(kvs) != 1 || string(kvs[0].Value) != "last" {
		t.Fatalf("Scan = %v, %v", kvs, err)
	}
	if got := st.take("h"); got.cells != 1 {
		t.Errorf("a scan of h returned %d cells, want the newest write record alone", got.cells)
	}

	// Bury the last value under rollback and lock-only records.
	const skipped = 5
	for i := range skipped {
		if i%2 == 0 {
			rollBack(t, e, "h", "v")
		} else {
			commitForUpdate(t, e, "w", "h/v", "other/v")
		}
	}
	tx, _ = e.client("r").BeginReadOnly(ctx)
	st.take("h")
	if v, err := tx.Get(ctx, "h", "v"); err != nil || string(v) != "last" {
		t.Fatalf("Get h = %q, %v; want last", v, err)
	}
	need := skipped + 1
	got := st.take("h")
	if got.cells >= 2*need || got.calls > bits.Len(uint(need)) {
		t.Errorf("a read passing %d skipped records returned %d cells in %d calls, want fewer than %d in at most %d",
			skipped, got.cells, got.calls, 2*need, bits.Len(uint(need)))
	}
}

// putSkipped commits row/col = v, then writes n records that readers
// skip over it, alternately rollback and lock-only records, at fresh
// timestamps, straight into the store (as a transaction's rollback or
// lock-only commit writes them).
func putSkipped(t *testing.T, e *env, row, col, v string, n int) {
	t.Helper()
	ctx := context.Background()
	if v != "" {
		commitValue(t, e, "w", row, col, v)
	}
	for i := range n {
		start, _ := e.oracle.Timestamp(ctx)
		var m []storage.Mutation
		if i%2 == 0 {
			m = rollbackMutations(col, start)
		} else {
			commit, _ := e.oracle.Timestamp(ctx)
			m = []storage.Mutation{storage.SetCell(FamilyWrite, col, commit, encodeWrite(&Write{Op: OpLock, StartTS: start}))}
		}
		if err := e.store.Mutate(ctx, []byte(row), m...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadSkipsAcrossPages: a read passes any number of rollback and
// lock-only records to the newest put below its snapshot, however they
// fall on its pages (one record, then pages doubling to maxPage): Get,
// CommitTS and Scan find the value under 1 to maxPage+5 of them, and a
// cell that has only such records is absent. A newer value committed
// after the reader began makes the owner's index send it to the store
// too.
func TestReadSkipsAcrossPages(t *testing.T) {
	counts := []int{1, 2, 3, 6, 7, 8, 14, 15, 16, maxPage - 1, maxPage, maxPage + 5}
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvBackend(t, backend)
			for _, k := range counts {
				putSkipped(t, e, fmt.Sprintf("c%03d", k), "v", fmt.Sprint(k), k)
				putSkipped(t, e, fmt.Sprintf("none%03d", k), "v", "", k)
			}
			tx, _ := e.client("r").BeginReadOnly(ctx)
			for _, k := range counts {
				commitValue(t, e, "w", fmt.Sprintf("c%03d", k), "v", "newer")
			}
			kvs, err := tx.Scan(ctx, "", "", "v", 0)
			if err != nil || len(kvs) != len(counts) {
				t.Fatalf("Scan = %d cells, %v; want %d", len(kvs), err, len(counts))
			}
			for i, k := range counts {
				row, want := fmt.Sprintf("c%03d", k), fmt.Sprint(k)
				if v, err := tx.Get(ctx, row, "v"); err != nil || string(v) != want {
					t.Errorf("Get %s = %q, %v; want %q", row, v, err, want)
				}
				if string(kvs[i].Row) != row || string(kvs[i].Value) != want {
					t.Errorf("Scan's cell %d = %s %q, want %s %q", i, kvs[i].Row, kvs[i].Value, row, want)
				}
				if ts, err := CommitTS(ctx, tx, row, "v"); err != nil || ts == 0 {
					t.Errorf("CommitTS %s = %d, %v", row, ts, err)
				}
				none := fmt.Sprintf("none%03d", k)
				if _, err := tx.Get(ctx, none, "v"); !errors.Is(err, ErrNotFound) {
					t.Errorf("Get %s (only skipped records) = %v, want not found", none, err)
				}
				if ts, err := CommitTS(ctx, tx, none, "v"); err != nil || ts != 0 {
					t.Errorf("CommitTS %s = %d, %v; want 0", none, ts, err)
				}
			}
		})
	}
}

// TestReadResolvesLockOverSkippedRecords: a read still resolves a lock
// older than its snapshot before it reads past it (invariant 2), on a
// cell whose value lies under rollback and lock-only records: a dead
// owner's lock is rolled back (the read then passes one more rollback
// record to the old value) and a committed transaction's secondary lock
// is rolled forward (the read returns its value).
func TestReadResolvesLockOverSkippedRecords(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvBackend(t, backend)
			putSkipped(t, e, "a", "v", "old", 9)
			putSkipped(t, e, "b", "v", "old", 9)
			crashWith := func(name, point string, cells ...string) {
				w := e.client(name)
				w.crash = func(p string) bool { return p == point }
				tx, _ := w.Begin(ctx)
				for _, c := range cells {
					_ = tx.Set(c, "v", []byte("new"))
				}
				err := tx.Commit(ctx)
				if point == crashAfterPrimaryPrewrite && !errors.Is(err, errCrashed) {
					t.Fatalf("commit returned %v, want the crash", err)
				}
				e.live.Unregister(name) // the process died
			}
			crashWith("dies-prewritten", crashAfterPrimaryPrewrite, "a")
			crashWith("dies-committed", crashAfterPrimaryCommit, "p", "b")
			if n := countLocksIn(t, e, "a") + countLocksIn(t, e, "b"); n != 2 {
				t.Fatalf("%d locks on a and b, want 2", n)
			}
			tx, _ := e.client("r").BeginReadOnly(ctx)
			for row, want := range map[string]string{"a": "old", "b": "new"} {
				if v, err := tx.Get(ctx, row, "v"); err != nil || string(v) != want {
					t.Errorf("Get %s = %q, %v; want %q", row, v, err, want)
				}
				if n := countLocksIn(t, e, row); n != 0 {
					t.Errorf("%d locks left on %s", n, row)
				}
			}
		})
	}
}

// TestNewestCommitFromRowCells: newestCommit given the cells a read of
// several columns of a row returned (one record each, the newest below
// the snapshot) finds each column's value among them, reading on only
// for a column whose record was skipped; given an empty slice it finds
// nothing and reads nothing.
func TestNewestCommitFromRowCells(t *testing.T) {
	ctx := context.Background()
	st := newCountingStore(t)
	e := newEnvOn(t, st, false)
	c := e.client("w")
	c.opts.InlineSize = 4 << 10
	putSkipped(t, e, "m", "a", "A", 3)
	putSkipped(t, e, "m", "b", "B", 0)
	ts, _ := e.oracle.Timestamp(ctx)
	r, err := e.store.ReadRow(ctx, []byte("m"), storage.Filter{
		{Family: FamilyLock, Qualifier: "a", Time: storage.Before(ts)},
		{Family: FamilyWrite, Qualifier: "a", Time: storage.Before(ts), Limit: 1},
		{Family: FamilyWrite, Qualifier: "b", Time: storage.Before(ts), Limit: 1},
	})
	if err != nil || len(r.Cells) != 2 {
		t.Fatalf("row m: %v, %v", r.Cells, err)
	}
	for col, want := range map[string]rowReads{"a": {calls: 2, cells: 3}, "b": {}} {
		st.take("m")
		w, _, found, err := c.newestCommit(ctx, []byte("m"), col, ts, r.Cells)
		if err != nil || !found || string(w.Value) != strings.ToUpper(col) {
			t.Fatalf("newestCommit %s = %+v, %v, %v", col, w, found, err)
		}
		if got := st.take("m"); got != want {
			t.Errorf("newestCommit %s read %d cells in %d calls, want %d in %d", col, got.cells, got.calls, want.cells, want.calls)
		}
	}
	if _, _, found, err := c.newestCommit(ctx, []byte("m"), "a", ts, []storage.Cell{}); found || err != nil {
		t.Errorf("newestCommit of no cells found %v, %v", found, err)
	}
	if got := st.take("m"); got != (rowReads{}) {
		t.Errorf("newestCommit of no cells read %+v", got)
	}
}
