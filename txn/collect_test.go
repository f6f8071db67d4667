package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// commitValue commits row/col = v through client name and returns the
// transaction's start_ts.
func commitValue(t *testing.T, e *env, name, row, col, v string) uint64 {
	t.Helper()
	tx, err := e.client(name).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set(row, col, []byte(v)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tx.StartTS()
}

// versions lists row's cells of family, by column and timestamp.
func versions(t *testing.T, e *env, row, family string) []storage.Cell {
	t.Helper()
	r, err := e.store.ReadRow(context.Background(), []byte(row), storage.Filter{{Family: family, AllQualifiers: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Cells
}

// TestCollectRow: below the safe point a row keeps, per column, its
// newest commit record and the data it points to, and loses the older
// records, their data and the rollback records; snapshots at and above
// the safe point read what they read before; the row's fence refuses a
// prewrite below the safe point.
func TestCollectRow(t *testing.T) {
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, backend == "indexed")
			late, _ := e.client("late").Begin(ctx) // begun below the safe point
			commitValue(t, e, "w", "r", "v", "1")
			commitValue(t, e, "w", "r", "v", "2")
			rolledBack, _ := e.client("w").Begin(ctx)
			if err := e.store.Mutate(ctx, []byte("r"), storage.SetCell(FamilyWrite, "v", rolledBack.StartTS(), encodeWrite(&Write{Op: OpRollback, StartTS: rolledBack.StartTS()}))); err != nil {
				t.Fatal(err)
			}
			reader, _ := e.client("reader").Begin(ctx)
			sp := reader.StartTS()
			commitValue(t, e, "w", "r", "v", "3")
			if n := len(versions(t, e, "r", FamilyWrite)); n != 4 {
				t.Fatalf("%d write records before, want 4", n)
			}

			got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp)
			if err != nil {
				t.Fatal(err)
			}
			// Removed: the commit record of "1" and its data, the rollback
			// record.
			if got.Versions != 3 || got.Bytes == 0 {
				t.Fatalf("collected %+v, want 3 versions", got)
			}
			if n, d := len(versions(t, e, "r", FamilyWrite)), len(versions(t, e, "r", FamilyData)); n != 2 || d != 2 {
				t.Fatalf("after: %d write records, %d data versions; want 2 and 2", n, d)
			}
			if v, err := reader.Get(ctx, "r", "v"); err != nil || string(v) != "2" {
				t.Fatalf("the snapshot at the safe point reads %q, %v; want 2", v, err)
			}
			now, _ := e.client("reader").Begin(ctx)
			if v, err := now.Get(ctx, "r", "v"); err != nil || string(v) != "3" {
				t.Fatalf("a new snapshot reads %q, %v; want 3", v, err)
			}
			// A prewrite below the safe point, of a column never written:
			// only the fence stops it.
			_ = late.Set("r", "untouched", []byte("x"))
			if err := late.Commit(ctx); !errors.Is(err, ErrConflict) {
				t.Fatalf("a commit begun below the safe point: %v; want a conflict on the fence", err)
			}
			// Again: the refused commit's abort left a rollback record
			// below the fence, which goes; then nothing is left to remove.
			if got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp); err != nil || got.Versions != 1 {
				t.Fatalf("collecting again: %+v, %v; want the refused commit's rollback record", got, err)
			}
			if got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp); err != nil || got.Versions != 0 {
				t.Fatalf("collecting a third time: %+v, %v", got, err)
			}
		})
	}
}

// TestCollectRowLocks: a live owner's lock below the safe point leaves
// the row untouched (ErrRowLocked); once its owner is dead the lock is
// resolved and the row collected.
func TestCollectRowLocks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	commitValue(t, e, "w", "r", "v", "1")
	commitValue(t, e, "w", "r", "v", "2")
	stuck := e.client("stuck")
	tx, _ := stuck.Begin(ctx)
	_ = tx.Set("r", "v", []byte("never"))
	stuck.crash = func(point string) bool { return point == crashAfterPrimaryPrewrite }
	_ = tx.Commit(ctx)
	reader, _ := e.client("reader").Begin(ctx)
	sp := reader.StartTS()
	before := len(versions(t, e, "r", FamilyWrite))
	if _, err := e.client("gc").CollectRow(ctx, []byte("r"), sp); !errors.Is(err, ErrRowLocked) {
		t.Fatalf("a live lock below the safe point: %v; want ErrRowLocked", err)
	}
	if n := len(versions(t, e, "r", FamilyWrite)); n != before {
		t.Fatalf("the locked row lost write records: %d, had %d", n, before)
	}
	e.live.Unregister("stuck")
	got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp)
	if err != nil || got.Versions == 0 {
		t.Fatalf("after the owner died: %+v, %v", got, err)
	}
	if len(versions(t, e, "r", FamilyLock)) != 0 {
		t.Fatal("the dead owner's lock is still there")
	}
	if v, err := reader.Get(ctx, "r", "v"); err != nil || string(v) != "2" {
		t.Fatalf("the snapshot at the safe point reads %q, %v; want 2", v, err)
	}
}

// TestCollectUnderLoad: bank transfers, two long readers and a collector
// that raises the safe point to a fresh timestamp and collects below it,
// pass after pass. Every sum is right or fails with ErrSnapshotTooOld.
// reader0 holds the safe point below its start_ts (as a registered
// transaction does) and waits for a collection pass between any two of
// its reads, so collections run inside its snapshot however fast the
// machine is; it must never be too old. reader1 holds nothing. The test
// ends on events (reader0's sums, versions removed), not on a clock.
func TestCollectUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := newEnv(t, true)
	const accounts, total = 20, 20 * 100
	init, _ := e.client("init").Begin(ctx)
	for i := range accounts {
		_ = init.Set(fmt.Sprint("acct", i), "bal", []byte("100"))
	}
	if err := init.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The clients, made before the goroutines (the harness's map is not
	// safe for concurrent use); the collector does not wait CollectDelay,
	// so every check reads the safe point.
	clients := map[string]*Client{}
	for _, name := range []string{"writer0", "writer1", "writer2", "reader0", "reader1", "gc", "final"} {
		clients[name] = e.client(name)
		clients[name].opts.safePointCache = -1
	}
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	var wg sync.WaitGroup
	var sums, heldSums, tooOld, removed, passes atomic.Int64
	errs := make(chan error, 16)
	fail := func(err error) { errs <- err; halt() }
	for w := range 3 {
		wg.Go(func() {
			c := clients[fmt.Sprint("writer", w)]
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !stopped() {
				tx, _ := c.Begin(ctx)
				a, b := fmt.Sprint("acct", rng.IntN(accounts)), fmt.Sprint("acct", rng.IntN(accounts))
				if a == b {
					continue
				}
				va, err1 := tx.Get(ctx, a, "bal")
				vb, err2 := tx.Get(ctx, b, "bal")
				if err := errors.Join(err1, err2); err != nil {
					if !errors.Is(err, ErrSnapshotTooOld) && ctx.Err() == nil {
						fail(err)
						return
					}
					continue
				}
				x, _ := strconv.Atoi(string(va))
				y, _ := strconv.Atoi(string(vb))
				_ = tx.Set(a, "bal", []byte(strconv.Itoa(x-1)))
				_ = tx.Set(b, "bal", []byte(strconv.Itoa(y+1)))
				if err := tx.Commit(ctx); err != nil && !errors.Is(err, ErrConflict) && ctx.Err() == nil {
					fail(err)
					return
				}
			}
		})
	}
	// between runs between two reads of a sum.
	sum := func(tx *Txn, between func() error) (int, error) {
		n := 0
		for i := range accounts {
			v, err := tx.Get(ctx, fmt.Sprint("acct", i), "bal")
			if err != nil {
				return 0, err
			}
			x, _ := strconv.Atoi(string(v))
			n += x
			if err := between(); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	check := func(n int, err error) bool {
		switch {
		case errors.Is(err, ErrSnapshotTooOld):
			tooOld.Add(1)
		case err != nil:
			if ctx.Err() == nil {
				fail(err)
			}
			return false
		case n != total:
			fail(fmt.Errorf("a snapshot sums to %d, want %d", n, total))
			return false
		default:
			sums.Add(1)
		}
		return true
	}
	// hold orders reader0's Begin and publication against the collector's
	// sample and advance, as a process's active set does.
	var hold sync.Mutex
	var held atomic.Uint64
	wg.Go(func() {
		c := clients["reader0"]
		for !stopped() {
			hold.Lock()
			tx, err := c.Begin(ctx)
			if err == nil {
				held.Store(tx.StartTS())
			}
			hold.Unlock()
			if err != nil {
				check(0, err)
				return
			}
			n, err := sum(tx, func() error {
				// Wait for a whole pass that starts after this read.
				want := passes.Load() + 2
				for passes.Load() < want {
					if stopped() {
						return ctx.Err()
					}
					time.Sleep(time.Millisecond)
				}
				return nil
			})
			held.Store(0)
			if errors.Is(err, ErrSnapshotTooOld) {
				fail(fmt.Errorf("a held reader at %d: %w", tx.StartTS(), err))
				return
			}
			if !check(n, err) {
				return
			}
			if heldSums.Add(1) >= 5 && removed.Load() > 0 {
				halt()
				return
			}
		}
	})
	wg.Go(func() {
		c := clients["reader1"]
		for !stopped() {
			tx, err := c.Begin(ctx)
			if err == nil {
				var n int
				n, err = sum(tx, func() error { time.Sleep(time.Millisecond); return nil })
				if err != nil && stopped() {
					return
				}
				if !check(n, err) {
					return
				}
			}
		}
	})
	wg.Go(func() {
		gc := clients["gc"]
		for !stopped() {
			hold.Lock()
			tx, err := gc.Begin(ctx)
			var sp uint64
			if err == nil {
				s := tx.StartTS()
				if h := held.Load(); h != 0 && h-1 < s {
					s = h - 1
				}
				sp, err = AdvanceSafePoint(ctx, e.store, s)
			}
			hold.Unlock()
			if err == nil {
				var got Collected
				got, _, _, err = gc.CollectBelow(ctx, sp, nil)
				removed.Add(int64(got.Versions))
			}
			if err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
			passes.Add(1)
		}
	})
	wg.Wait()
	if ctx.Err() != nil {
		t.Errorf("ran out of time: %v", ctx.Err())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if removed.Load() == 0 || heldSums.Load() == 0 {
		t.Fatalf("%d versions removed, %d held sums checked: the test checked nothing", removed.Load(), heldSums.Load())
	}
	if n, err := sum(mustBegin(t, clients["final"]), func() error { return nil }); err != nil || n != total {
		t.Fatalf("the final sum: %d, %v", n, err)
	}
	t.Logf("%d passes removed %d versions; %d sums right (%d held), %d too old", passes.Load(), removed.Load(), sums.Load(), heldSums.Load(), tooOld.Load())
}

// mustBegin begins a transaction of c.
func mustBegin(t *testing.T, c *Client) *Txn {
	t.Helper()
	tx, err := c.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// watching observes the columns it names.
type watching []string

func (w watching) observed(col string) bool {
	for _, c := range w {
		if c == col {
			return true
		}
	}
	return false
}
func (w watching) Snapshot() (Observed, uint64) { return w.observed, 1 }
func (w watching) Refresh(context.Context) (Observed, uint64, error) {
	return w.observed, 1, nil
}

// TestCollectDeleted: a cell deleted below the safe point loses every
// record when no observer watches its column; snapshots at the safe
// point still find it absent. An observed column keeps its delete record
// (the observers' dirty check compares it with their acks).
func TestCollectDeleted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	e.client("gc").SetObservers(watching{"watched"})
	commitValue(t, e, "w", "r", "watched", "1")
	delW, _ := e.client("w").Begin(ctx)
	_ = delW.Delete("r", "watched")
	if err := delW.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	commitValue(t, e, "w", "r", "v", "1")
	del, _ := e.client("w").Begin(ctx)
	_ = del.Delete("r", "v")
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	reader, _ := e.client("reader").Begin(ctx)
	got, _, next, err := e.client("gc").CollectBelow(ctx, reader.StartTS(), nil)
	// v: its put, the put's data, the delete; watched: its put and data.
	if err != nil || next != nil || got.Versions != 5 {
		t.Fatalf("collected %+v (next %q), %v; want 5 versions", got, next, err)
	}
	left := versions(t, e, "r", FamilyWrite)
	if len(left) != 1 || left[0].Qualifier != "watched" || writeOp(left[0].Value) != OpDelete || len(versions(t, e, "r", FamilyData)) != 0 {
		t.Fatalf("left %v; want the watched column's delete record only", left)
	}
	if _, err := reader.Get(ctx, "r", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the snapshot at the safe point: %v; want not found", err)
	}
}

// TestCollectLocksFirst: a transaction whose owner died after its commit
// point leaves its secondary's lock; its primary's cell is written again
// since, so its commit record there is no longer the newest. A pass must
// roll the secondary forward before it removes that record: else the
// secondary, resolved later from a primary with no record, is rolled back
// although its transaction committed.
func TestCollectLocksFirst(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvBackend(t, backend)
			w := e.client("writer")
			tx, _ := w.Begin(ctx)
			_ = tx.Set("a", "v", []byte("t"))
			_ = tx.Set("b", "v", []byte("t"))
			w.crash = func(p string) bool { return p == crashAfterPrimaryCommit }
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			e.live.Unregister("writer") // the process died
			primary := "a"
			if countLocksIn(t, e, "a") == 1 {
				primary = "b" // the primary is the other row
			}
			commitValue(t, e, "w2", primary, "v", "later")
			commitValue(t, e, "w2", primary, "v", "latest")
			gc := e.client("gc")
			gc.opts.safePointCache = -1
			p, err := gc.CollectOnce(ctx, CollectorOptions{Lifetime: 10 * time.Millisecond, Delay: -1}, false)
			if err != nil || p.Versions == 0 {
				t.Fatalf("pass: %+v, %v", p, err)
			}
			secondary := map[string]string{"a": "b", "b": "a"}[primary]
			r, _ := e.client("reader").BeginReadOnly(ctx)
			if v, err := r.Get(ctx, secondary, "v"); err != nil || string(v) != "t" {
				t.Fatalf("the committed transaction's secondary reads %q, %v; want t", v, err)
			}
		})
	}
}

// TestCollectLockOnly: a lock-only record (OpLock) at or below the safe
// point goes as a rollback record does, newest of its cell or not, and
// is never the commit record kept: the put below it stays with its data,
// and a cell with only lock-only records is left empty (CollectBelow
// visits a row whose one record is lock-only). One above the safe point
// stays. Snapshots at the safe point read what they read before.
func TestCollectLockOnly(t *testing.T) {
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, backend == "indexed")
			commitValue(t, e, "w", "r", "v", "1")
			commitForUpdate(t, e, "w", "r/v", "r/only", "lone/v")
			commitForUpdate(t, e, "w", "r/v")
			reader, _ := e.client("reader").Begin(ctx)
			sp := reader.StartTS()
			above := commitForUpdate(t, e, "w", "r/v")

			got, skipped, next, err := e.client("gc").CollectBelow(ctx, sp, nil)
			// r/v: two lock-only records; r/only: one; lone/v: one.
			if err != nil || skipped != 0 || next != nil || got.Versions != 4 {
				t.Fatalf("collected %+v (skipped %d, next %q), %v; want 4 versions", got, skipped, next, err)
			}
			left := writeRecords(t, e, "r", "v")
			if len(left) != 2 || writeOp(left[0].Value) != OpLock || left[0].TS <= sp || writeOp(left[1].Value) != OpPut {
				t.Fatalf("r/v keeps %v; want the lock-only record above the safe point and the put", left)
			}
			if n := len(versions(t, e, "r", FamilyData)); n != 1 {
				t.Fatalf("r keeps %d data versions, want the put's", n)
			}
			if recs := append(writeRecords(t, e, "r", "only"), writeRecords(t, e, "lone", "v")...); len(recs) != 0 {
				t.Fatalf("cells with only lock-only records keep %v", recs)
			}
			if v, err := reader.Get(ctx, "r", "v"); err != nil || string(v) != "1" {
				t.Fatalf("the snapshot at the safe point reads %q, %v; want 1", v, err)
			}
			if _, err := reader.Get(ctx, "lone", "v"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a collected lock-only cell: %v; want not found", err)
			}
			if ts, err := CommitTS(ctx, reader, "r", "v"); err != nil || ts == 0 || ts >= above.StartTS() {
				t.Fatalf("CommitTS at the safe point = %d, %v; want the put's", ts, err)
			}
		})
	}
}

func countLocksIn(t *testing.T, e *env, row string) int {
	t.Helper()
	return len(versions(t, e, row, FamilyLock))
}

// removals describes deletions: family@ts for one version, family@[lo,hi)
// for a time range.
func removals(muts []storage.Mutation) []string {
	var out []string
	for _, m := range muts {
		if m.Time.End == m.Time.Start+1 {
			out = append(out, fmt.Sprintf("%s@%d", m.Family, m.Time.Start))
		} else {
			out = append(out, fmt.Sprintf("%s@[%d,%d)", m.Family, m.Time.Start, m.Time.End))
		}
	}
	return out
}

// TestCollectMutationsRanges: of a column's versions, those below the
// lowest kept one go in one time-range delete ending just past the newest
// of them; removed versions between kept ones go one by one.
func TestCollectMutationsRanges(t *testing.T) {
	rec := func(ts uint64, op Op, start uint64) storage.Cell {
		return storage.Cell{Family: FamilyWrite, Qualifier: "v", TS: ts, Value: encodeWrite(&Write{Op: op, StartTS: start})}
	}
	dat := func(ts uint64) storage.Cell {
		return storage.Cell{Family: FamilyData, Qualifier: "v", TS: ts, Value: []byte("x")}
	}
	cells := []storage.Cell{
		rec(40, OpPut, 25),      // above the safe point: kept, its data too
		rec(32, OpRollback, 31), // removed, alone (above a kept one)
		rec(30, OpPut, 28),      // the newest at or below 35: kept
		rec(27, OpPut, 26), rec(24, OpRollback, 23), rec(22, OpPut, 21), rec(12, OpPut, 11),
		dat(28), dat(26), dat(25), dat(21), dat(11), // 25 is kept for the record at 40
	}
	muts, got, err := collectMutations(cells, 35, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"write@32", "write@[0,28)", "data@26", "data@[0,22)"}
	if fmt.Sprint(removals(muts)) != fmt.Sprint(want) || got.Versions != 8 {
		t.Fatalf("removed %v (%+v), want %v", removals(muts), got, want)
	}
	// One version below the kept one goes as one version.
	muts, _, _ = collectMutations([]storage.Cell{rec(30, OpPut, 28), rec(12, OpPut, 11), dat(28), dat(11)}, 35, nil, nil)
	if want := []string{"write@12", "data@11"}; fmt.Sprint(removals(muts)) != fmt.Sprint(want) {
		t.Fatalf("removed %v, want %v", removals(muts), want)
	}
}

// TestCollectMutationsAcked: an observed column's newest delete record at
// or below the safe point stays until every observer's ack is at or past
// it; then it goes, with everything below it.
func TestCollectMutationsAcked(t *testing.T) {
	rec := func(col string, ts uint64, op Op, start uint64) storage.Cell {
		return storage.Cell{Family: FamilyWrite, Qualifier: col, TS: ts, Value: encodeWrite(&Write{Op: op, StartTS: start})}
	}
	ack := func(v uint64) []storage.Cell {
		return []storage.Cell{
			rec("__ack", 50, OpPut, 45),
			{Family: FamilyData, Qualifier: "__ack", TS: 45, Value: binary.BigEndian.AppendUint64(nil, v)},
		}
	}
	base := []storage.Cell{
		rec("v", 30, OpDelete, 29), rec("v", 20, OpPut, 19),
		{Family: FamilyData, Qualifier: "v", TS: 19, Value: []byte("x")},
	}
	observed := func(col string) bool { return col == "v" }
	processed := func(col string, ts uint64, value func(string) ([]byte, bool)) bool {
		v, ok := value("__ack")
		return ok && binary.BigEndian.Uint64(v) >= ts
	}
	for _, c := range []struct {
		name  string
		cells []storage.Cell
		want  []string
	}{
		{"no ack", base, []string{"write@20", "data@19"}},
		{"an ack below the delete", append(ack(25), base...), []string{"write@20", "data@19"}},
		{"an ack past the delete", append(ack(45), base...), []string{"write@[0,31)", "data@19"}},
	} {
		muts, _, err := collectMutations(c.cells, 60, observed, processed)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(removals(muts)) != fmt.Sprint(c.want) {
			t.Errorf("%s: removed %v, want %v", c.name, removals(muts), c.want)
		}
	}
}

// TestCollectMutationsLockOnly: collectMutations removes a lock-only
// record at or below the safe point wherever it is in its cell, and keeps
// the newest put below it with its data.
func TestCollectMutationsLockOnly(t *testing.T) {
	rec := func(ts uint64, op Op, start uint64) storage.Cell {
		return storage.Cell{Family: FamilyWrite, Qualifier: "v", TS: ts, Value: encodeWrite(&Write{Op: op, StartTS: start})}
	}
	cells := []storage.Cell{
		rec(20, OpLock, 19), // above the safe point: kept
		rec(9, OpLock, 8),   // the newest at or below it: removed, not kept
		rec(6, OpPut, 5),    // kept, with its data
		rec(4, OpLock, 3),   // removed
		rec(2, OpPut, 1),    // removed, with its data
		{Family: FamilyData, Qualifier: "v", TS: 5, Value: []byte("five")},
		{Family: FamilyData, Qualifier: "v", TS: 1, Value: []byte("one")},
	}
	muts, got, err := collectMutations(cells, 10, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	removed := removals(muts)
	want := []string{"write@9", "write@[0,5)", "data@1"}
	if fmt.Sprint(removed) != fmt.Sprint(want) || got.Versions != 4 {
		t.Fatalf("removed %v (%+v), want %v", removed, got, want)
	}
}
