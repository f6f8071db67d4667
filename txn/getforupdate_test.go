package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// newEnvLockOnly is newEnvBackend, and "pebble": the embedded Pebble
// store, Exclusive, so the client keeps its index as an embedded DB does.
func newEnvLockOnly(t *testing.T, backend string) *env {
	if backend != "pebble" {
		return newEnvBackend(t, backend)
	}
	st, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return newEnvOn(t, st, true)
}

// lockOnlyBackends are the stores the lock-only tests run on.
var lockOnlyBackends = append([]string{"pebble"}, backends...)

// commitForUpdate commits a transaction of client name that reads each
// cell (row/col) with GetForUpdate and writes nothing, and returns it.
func commitForUpdate(t *testing.T, e *env, name string, cells ...string) *Txn {
	t.Helper()
	ctx := context.Background()
	tx, err := e.client(name).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cell := range cells {
		row, col, _ := strings.Cut(cell, "/")
		if _, err := tx.GetForUpdate(ctx, row, col); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return tx
}

// writeRecords returns the write records of row/col, newest first.
func writeRecords(t *testing.T, e *env, row, col string) []storage.Cell {
	t.Helper()
	r, err := e.store.ReadRow(context.Background(), []byte(row), storage.Filter{{Family: FamilyWrite, Qualifier: col}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Cells
}

// TestLockOnlyRecordsIgnoredByReaders: the OpLock records GetForUpdate
// commits, however many over a value (more than a read's first four pages
// of write records, 1+2+4+8), change nothing a reader sees: Get, Scan and CommitTS read the
// newest put or delete below them, a cell with only lock-only records is
// absent, and the owner's index keeps the put as the cell's latest commit
// (a read served from it would otherwise find no value at all).
func TestLockOnlyRecordsIgnoredByReaders(t *testing.T) {
	for _, backend := range lockOnlyBackends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvLockOnly(t, backend)
			commitValue(t, e, "w", "a", "v", "1")
			commitValue(t, e, "w", "b", "v", "2")
			first, _ := e.client("r").Begin(ctx)
			putTS, err := CommitTS(ctx, first, "a", "v")
			if err != nil || putTS == 0 {
				t.Fatalf("CommitTS before: %d, %v", putTS, err)
			}
			if v, err := first.Get(ctx, "a", "v"); err != nil || string(v) != "1" { // fills the index
				t.Fatalf("a before = %q, %v", v, err)
			}
			const lockOnly = 16
			var last *Txn
			for range lockOnly {
				last = commitForUpdate(t, e, "w", "a/v", "b/v", "none/v")
			}
			recs := writeRecords(t, e, "a", "v")
			if len(recs) != lockOnly+1 {
				t.Fatalf("a/v has %d write records, want %d", len(recs), lockOnly+1)
			}
			if w, err := DecodeWrite(recs[0].Value); err != nil || w.Op != OpLock || w.StartTS != last.StartTS() || w.Inline {
				t.Fatalf("the newest record of a/v: %+v, %v; want a lock-only record of %d", w, err, last.StartTS())
			}
			if r, err := e.store.ReadRow(ctx, []byte("a"), storage.Filter{{Family: FamilyData, Qualifier: "v", Time: storage.At(last.StartTS())}}); err != nil || len(r.Cells) != 0 {
				t.Fatalf("a lock-only commit wrote data: %v, %v", r.Cells, err)
			}
			if ix := e.base.index; ix != nil {
				if v := ix.view([]byte("a"), "v", math.MaxUint64); v.known && v.latest != putTS {
					t.Fatalf("the index's latest commit of a/v is %d, want the put's %d", v.latest, putTS)
				}
			}
			tx, _ := e.client("r").Begin(ctx)
			for row, want := range map[string]string{"a": "1", "b": "2"} {
				if v, err := tx.Get(ctx, row, "v"); err != nil || string(v) != want {
					t.Errorf("Get %s = %q, %v; want %q", row, v, err, want)
				}
			}
			if _, err := tx.Get(ctx, "none", "v"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get of a cell with only lock-only records: %v; want not found", err)
			}
			kvs, err := tx.Scan(ctx, "", "", "v", 0)
			if err != nil || len(kvs) != 2 || string(kvs[0].Value) != "1" || string(kvs[1].Value) != "2" {
				t.Errorf("Scan = %v, %v; want a=1, b=2", kvs, err)
			}
			if ts, err := CommitTS(ctx, tx, "a", "v"); err != nil || ts != putTS {
				t.Errorf("CommitTS(a) = %d, %v; want the put's %d", ts, err, putTS)
			}
			if ts, err := CommitTS(ctx, tx, "none", "v"); err != nil || ts != 0 {
				t.Errorf("CommitTS of a cell with only lock-only records = %d, %v; want 0", ts, err)
			}
			// A write after the lock-only records is read as usual.
			commitValue(t, e, "w", "a", "v", "3")
			if v, err := e.client("r").get(ctx, math.MaxUint64-1, []byte("a"), "v"); err != nil || string(v) != "3" {
				t.Errorf("a after a later put = %q, %v; want 3", v, err)
			}
		})
	}
}

// TestGetForUpdateConflicts: two transactions that read one cell with
// GetForUpdate conflict, and so does one that writes it, in either commit
// order; a plain Get conflicts with neither.
func TestGetForUpdateConflicts(t *testing.T) {
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, backend == "indexed")
			commitValue(t, e, "w", "x", "v", "0")
			c := e.client("w")
			run := func(name string, first, second func(*Txn) error, wantReason string) {
				t.Helper()
				t1, _ := c.Begin(ctx)
				t2, _ := c.Begin(ctx)
				if err := errors.Join(first(t1), second(t2)); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if err := t1.Commit(ctx); err != nil {
					t.Fatalf("%s: the first commit: %v", name, err)
				}
				err := t2.Commit(ctx)
				var ce *ConflictError
				switch {
				case wantReason == "" && err != nil:
					t.Errorf("%s: the second commit: %v; want it to commit", name, err)
				case wantReason != "" && (!errors.As(err, &ce) || !strings.Contains(ce.Reason, wantReason)):
					t.Errorf("%s: the second commit: %v; want a conflict: %s", name, err, wantReason)
				}
			}
			forUpdate := func(tx *Txn) error {
				if _, err := tx.GetForUpdate(ctx, "x", "v"); err != nil {
					return err
				}
				return tx.Set(fmt.Sprint("other", tx.StartTS()), "v", []byte("x")) // a write elsewhere
			}
			write := func(tx *Txn) error { return tx.Set("x", "v", []byte("w")) }
			read := func(tx *Txn) error {
				if _, err := tx.Get(ctx, "x", "v"); err != nil {
					return err
				}
				return tx.Set("elsewhere", "v", []byte("x"))
			}
			run("for update, then for update", forUpdate, forUpdate, "read for update committed")
			run("for update, then a write", forUpdate, write, "read for update committed")
			run("a write, then for update", write, forUpdate, "newer write committed")
			run("a plain read, then a write", read, write, "")
			run("for update, then a plain read", forUpdate, read, "")
			if v, err := e.client("r").get(ctx, math.MaxUint64-1, []byte("x"), "v"); err != nil || string(v) != "w" {
				t.Fatalf("x = %q, %v; want the committed writes' w", v, err)
			}
		})
	}
}

// TestGetForUpdateBuffer: GetForUpdate reads as Get does (the own write
// included), marks the cell once, gives way to a Set or Delete of the
// cell before or after, never hides a stored value from the transaction's
// own Get and Scan, keeps a put or delete as the primary, counts towards
// MaxTxnWrites, and is refused in a read-only transaction.
func TestGetForUpdateBuffer(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	commitValue(t, e, "w", "a", "v", "1")
	commitValue(t, e, "w", "b", "v", "2")
	c := e.client("w")
	tx, _ := c.Begin(ctx)
	if v, err := tx.GetForUpdate(ctx, "a", "v"); err != nil || string(v) != "1" {
		t.Fatalf("GetForUpdate a = %q, %v", v, err)
	}
	if _, err := tx.GetForUpdate(ctx, "absent", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetForUpdate of an absent cell: %v; want ErrNotFound", err)
	}
	if _, err := tx.GetForUpdate(ctx, "a", "v"); err != nil { // marked once
		t.Fatal(err)
	}
	if v, err := tx.Get(ctx, "a", "v"); err != nil || string(v) != "1" {
		t.Fatalf("Get a after its mark = %q, %v; want the stored 1", v, err)
	}
	if kvs, err := tx.Scan(ctx, "", "", "v", 0); err != nil || len(kvs) != 2 {
		t.Fatalf("Scan after the marks = %v, %v; want a and b", kvs, err)
	}
	if Writes(tx, "a", "v") {
		t.Fatal("Writes reports a lock-only mark as a write of the cell")
	}
	if err := tx.Set("b", "v", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if v, err := tx.GetForUpdate(ctx, "b", "v"); err != nil || string(v) != "3" {
		t.Fatalf("GetForUpdate of an own write = %q, %v", v, err)
	}
	if err := tx.Delete("absent", "v"); err != nil { // takes the mark's place
		t.Fatal(err)
	}
	ops := map[string]Op{}
	for _, m := range tx.writes {
		ops[string(m.row)] = m.op
	}
	if len(tx.writes) != 3 || ops["a"] != OpLock || ops["b"] != OpPut || ops["absent"] != OpDelete {
		t.Fatalf("buffered %v; want a lock-only a, a put of b, a delete of absent", ops)
	}
	if tx.writes[0].op == OpLock {
		t.Fatalf("the primary is the lock-only mark of %s", tx.writes[0].row)
	}
	for i, m := range tx.writes {
		if j, ok := tx.find(m.row, m.col); !ok || j != i {
			t.Fatalf("find of %s is %d (%v), want %d", m.row, j, ok, i)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for row, want := range map[string]Op{"a": OpLock, "b": OpPut, "absent": OpDelete} {
		if recs := writeRecords(t, e, row, "v"); len(recs) == 0 || writeOp(recs[0].Value) != want {
			t.Errorf("the newest record of %s: %v; want %s", row, recs, want)
		}
	}

	c.opts.MaxTxnWrites = 2
	small, _ := c.Begin(ctx)
	_, err1 := small.GetForUpdate(ctx, "a", "v")
	_, err2 := small.GetForUpdate(ctx, "b", "v")
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if _, err := small.GetForUpdate(ctx, "c", "v"); !errors.Is(err, ErrTxnTooLarge) {
		t.Fatalf("a third mark past MaxTxnWrites 2: %v; want ErrTxnTooLarge", err)
	}
	if err := small.Set("a", "v", []byte("x")); err != nil {
		t.Fatalf("a write over a mark, at the limit: %v", err)
	}
	_ = small.Rollback(ctx)

	ro, _ := c.BeginReadOnly(ctx)
	if _, err := ro.GetForUpdate(ctx, "a", "v"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("GetForUpdate in a read-only transaction: %v; want ErrReadOnly", err)
	}
	if _, err := small.GetForUpdate(ctx, "a", "v"); !errors.Is(err, ErrTxnFinished) {
		t.Fatalf("GetForUpdate after Rollback: %v; want ErrTxnFinished", err)
	}
	if _, err := tx.GetForUpdate(ctx, "a", "x:lock"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("GetForUpdate of a bad column: %v; want ErrInvalidArgument", err)
	}
}

// TestResolveLockOnly: a crashed transaction's OpLock locks are settled
// by readers as any lock: rolled forward into OpLock records (no data, the
// value unchanged) after its primary committed, rolled back once its
// owner is dead before that.
func TestResolveLockOnly(t *testing.T) {
	cases := []struct {
		name    string
		set     bool // the transaction also writes p/v (then its primary)
		point   string
		forward bool
	}{
		{"lock-only/after-primary-commit", false, crashAfterPrimaryCommit, true},
		{"lock-only/after-secondary-prewrite", false, crashAfterSecondaryPrewrite, false},
		{"with-a-write/after-primary-commit", true, crashAfterPrimaryCommit, true},
		{"with-a-write/after-secondary-prewrite", true, crashAfterSecondaryPrewrite, false},
	}
	for _, backend := range backends {
		for _, tc := range cases {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				e := newEnvBackend(t, backend)
				commitValue(t, e, "init", "p", "v", "p0")
				commitValue(t, e, "init", "s", "v", "s0")
				w := e.client("writer")
				tx, _ := w.Begin(ctx)
				if tc.set {
					_ = tx.Set("p", "v", []byte("p1"))
				} else if _, err := tx.GetForUpdate(ctx, "p", "v"); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.GetForUpdate(ctx, "s", "v"); err != nil {
					t.Fatal(err)
				}
				w.crash = func(p string) bool { return p == tc.point }
				_ = tx.Commit(ctx)
				lr, err := e.store.ReadRow(ctx, []byte("s"), storage.Filter{{Family: FamilyLock, Qualifier: "v"}})
				if err != nil || len(lr.Cells) != 1 {
					t.Fatalf("s's lock after the crash: %v, %v", lr.Cells, err)
				}
				if l, err := decodeLock(lr.Cells[0].Value); err != nil || l.Op != OpLock || string(l.PrimaryRow) != "p" {
					t.Fatalf("s's lock: %+v, %v; want a lock-only lock naming p", l, err)
				}
				e.live.Unregister("writer")
				r, _ := e.client("reader").BeginReadOnly(ctx)
				if v, err := r.Get(ctx, "s", "v"); err != nil || string(v) != "s0" {
					t.Fatalf("s = %q, %v; want s0", v, err)
				}
				wantP := map[bool]string{true: "p1", false: "p0"}[tc.set && tc.forward]
				if v, err := r.Get(ctx, "p", "v"); err != nil || string(v) != wantP {
					t.Fatalf("p = %q, %v; want %s", v, err, wantP)
				}
				if n := countLocks(t, e.store); n != 0 {
					t.Fatalf("%d locks survive the reads", n)
				}
				recs := writeRecords(t, e, "s", "v")
				got, err := DecodeWrite(recs[0].Value)
				switch {
				case err != nil:
					t.Fatal(err)
				case tc.forward && (got.Op != OpLock || got.StartTS != tx.StartTS() || recs[0].TS <= tx.StartTS()):
					t.Fatalf("s's newest record %+v at %d; want a lock-only commit record of %d", got, recs[0].TS, tx.StartTS())
				case !tc.forward && (got.Op != OpRollback || recs[0].TS != tx.StartTS()):
					t.Fatalf("s's newest record %+v at %d; want a rollback record at %d", got, recs[0].TS, tx.StartTS())
				}
				if r, err := e.store.ReadRow(ctx, []byte("s"), storage.Filter{{Family: FamilyData, Qualifier: "v", Time: storage.At(tx.StartTS())}}); err != nil || len(r.Cells) != 0 {
					t.Fatalf("s has data at the lock-only transaction's start_ts: %v, %v", r.Cells, err)
				}
			})
		}
	}
}

// versionedObservers is a registry whose prewrites' snapshot observes
// nothing and whose re-read before the commit point observes col: the
// path of a registration made during a commit (notifyMissed).
type versionedObservers struct{ col string }

func (versionedObservers) Snapshot() (Observed, uint64) { return nil, 1 }
func (o versionedObservers) Refresh(context.Context) (Observed, uint64, error) {
	return func(c string) bool { return c == o.col }, 2, nil
}

// TestGetForUpdateSetsNoNotification: a lock-only mark of an observed
// column sets no notification (it changes no value), in the prewrite,
// ahead of it where notifications live apart, or for a registration made
// during the commit; a write of the column still sets one.
func TestGetForUpdateSetsNoNotification(t *testing.T) {
	registries := map[string]Observers{"registered": watching{"watched"}, "registered-during-commit": versionedObservers{"watched"}}
	for _, backend := range backends {
		for name, obs := range registries {
			t.Run(backend+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				e := newEnvBackend(t, backend)
				c := e.client("w")
				c.SetObservers(obs)
				tx, _ := c.Begin(ctx)
				if _, err := tx.GetForUpdate(ctx, "r", "watched"); !errors.Is(err, ErrNotFound) {
					t.Fatal(err)
				}
				_ = tx.Set("q", "watched", []byte("x"))
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if ns, err := c.Notifications().Read(ctx, []byte("r")); err != nil || len(ns) != 0 {
					t.Fatalf("notifications of the lock-only mark: %v, %v; want none", ns, err)
				}
				if ns, err := c.Notifications().Read(ctx, []byte("q")); err != nil || len(ns) != 1 {
					t.Fatalf("notifications of the write: %v, %v; want one", ns, err)
				}
			})
		}
	}
}
