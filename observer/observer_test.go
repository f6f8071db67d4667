package observer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/txn"
)

type env struct {
	t      *testing.T
	store  storage.Store
	client *txn.Client
	f      *Framework
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	return newEnvOn(t, memory.New(), opts)
}

// newEnvOn is newEnv on st, which it closes at cleanup.
func newEnvOn(t *testing.T, st storage.Store, opts Options) *env {
	t.Helper()
	ctx := context.Background()
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orc := oracle.NewClient(alloc)
	live := coord.NewLocal()
	c, err := txn.NewClient(ctx, st, orc, live, txn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live.Register(c.Owner())
	f, err := New(ctx, st, c, orc, coord.NewLocalLocker(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); _ = alloc.Close(); _ = st.Close() })
	return &env{t: t, store: st, client: c, f: f}
}

func (e *env) update(fn func(tx *txn.Txn) error) {
	e.t.Helper()
	ctx := context.Background()
	for {
		tx, err := e.client.Begin(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := fn(tx); err != nil {
			e.t.Fatal(err)
		}
		err = tx.Commit(ctx)
		if errors.Is(err, txn.ErrConflict) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

func (e *env) set(row, col, v string) {
	e.update(func(tx *txn.Txn) error { return tx.Set(row, col, []byte(v)) })
}

func (e *env) get(row, col string) string {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.client.BeginReadOnly(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := tx.Get(ctx, row, col)
	if errors.Is(err, txn.ErrNotFound) {
		return "<none>"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(v)
}

func (e *env) drain(scanners int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.f.Run(ctx, WorkerOptions{Scanners: scanners, Drain: true, MaxIdle: 5 * time.Millisecond}); err != nil {
		e.t.Fatalf("drain: %v", err)
	}
}

func (e *env) pending() int {
	e.t.Helper()
	n := 0
	err := e.store.Scan(context.Background(), nil, nil, notifyAll, 0, func(r storage.Row) bool { n += len(r.Cells); return true })
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) counts(name string) map[string]int64 {
	e.t.Helper()
	st, err := e.f.Status(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range st.Observers {
		if o.Name == name {
			return o.Counts
		}
	}
	return nil
}

// copyTo is an observer copying column from to column to of the same row.
func copyTo(to string, runs *atomic.Int64) Func {
	return func(ctx context.Context, tx *txn.Txn, row, col string) error {
		runs.Add(1)
		v, err := tx.Get(ctx, row, col)
		if errors.Is(err, txn.ErrNotFound) {
			return tx.Delete(row, to)
		}
		if err != nil {
			return err
		}
		return tx.Set(row, to, v)
	}
}

func TestObserverRunsAndCollapses(t *testing.T) {
	e := newEnv(t, Options{})
	var runs atomic.Int64
	if err := e.f.Register(context.Background(), Observer{Name: "copy", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // five changes before any run: one run (collapsing)
		e.set("r1", "in", fmt.Sprint("v", i))
	}
	e.set("r2", "in", "x")
	e.drain(1)
	if got := e.get("r1", "out"); got != "v4" {
		t.Fatalf("r1 out = %q, want v4", got)
	}
	if got := e.get("r2", "out"); got != "x" {
		t.Fatalf("r2 out = %q", got)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("observer ran %d times for 2 dirty cells", n)
	}
	if n := e.pending(); n != 0 {
		t.Fatalf("%d notifications left after drain", n)
	}
	if c := e.counts("copy"); c["runs"] != 2 || c["commits"] != 2 {
		t.Fatalf("stored counts %v", c)
	}
	// A delete is a change too.
	e.update(func(tx *txn.Txn) error { return tx.Delete("r2", "in") })
	e.drain(2)
	if got := e.get("r2", "out"); got != "<none>" {
		t.Fatalf("after delete: out = %q", got)
	}
	// Nothing changed: nothing runs.
	before := runs.Load()
	e.drain(2)
	if runs.Load() != before {
		t.Fatal("an observer ran with no change")
	}
}

func TestObserverChainAndBackfill(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	e.set("old", "in", "before-registration")
	var a, b atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "a", Column: "in", Fn: copyTo("mid", &a)}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Register(ctx, Observer{Name: "b", Column: "mid", Fn: copyTo("out", &b)}); err != nil {
		t.Fatal(err)
	}
	e.set("new", "in", "after")
	e.drain(3)
	for row, want := range map[string]string{"old": "before-registration", "new": "after"} {
		if got := e.get(row, "out"); got != want {
			t.Fatalf("%s: out = %q, want %q", row, got, want)
		}
	}
}

func TestRegisterBadInput(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	fn := copyTo("x", new(atomic.Int64))
	for _, o := range []Observer{
		{Name: "", Column: "c", Fn: fn},
		{Name: "bad name", Column: "c", Fn: fn},
		{Name: "_scanners", Column: "c", Fn: fn},
		{Name: "ok", Column: "", Fn: fn},
		{Name: "ok", Column: "a:b", Fn: fn},
		{Name: "ok", Column: "__ack", Fn: fn},
	} {
		if err := e.f.Register(ctx, o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Register(%+v) = %v, want ErrInvalidArgument", o, err)
		}
	}
	if err := e.f.Register(ctx, Observer{Name: "ok", Column: "c", Fn: fn}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Register(ctx, Observer{Name: "ok", Column: "d", Fn: fn}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("re-registering a name on another column: %v", err)
	}
	if err := e.f.Register(ctx, Observer{Name: "w", Column: "c", Weak: true, Fn: fn}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a weak observer on a strong column: %v", err)
	}
	if err := e.f.Notify(ctx, "r", "c"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Notify on a strong column: %v", err)
	}
	if n := e.pending(); n != 0 {
		t.Fatalf("bad input left %d notifications", n)
	}
}

// TestRegisterWithoutCode: a registration stored without code (a
// restore's) is listed with the others, backfills its column and makes
// writes notify like any other; the notifications wait until a process
// registers the code, which then runs on every cell; a registration
// without code never detaches code this process attached.
func TestRegisterWithoutCode(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	e.set("old", "in", "1")
	if err := e.f.Register(ctx, Observer{Name: "w", Column: "signal", Weak: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Register(ctx, Observer{Name: "w", Column: "signal"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a stored name registered again as another kind: %v", err)
	}
	if err := e.f.Register(ctx, Observer{Name: "a", Column: "in"}); err != nil {
		t.Fatal(err)
	}
	e.set("new", "in", "2")
	got, err := e.f.Registrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Observer{{Name: "a", Column: "in"}, {Name: "w", Column: "signal", Weak: true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Registrations = %+v, want %+v", got, want)
	}
	if n := e.pending(); n != 2 {
		t.Fatalf("%d notifications pending, want 2 (the backfilled cell and the new one)", n)
	}
	e.drain(1)
	if n := e.pending(); n != 2 {
		t.Fatalf("a drain without the code left %d notifications, want 2", n)
	}
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "a", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Register(ctx, Observer{Name: "a", Column: "in"}); err != nil {
		t.Fatal(err)
	}
	e.drain(1)
	if runs.Load() != 2 || e.get("old", "out") != "1" || e.get("new", "out") != "2" {
		t.Fatalf("after the code was registered: %d runs, out %q %q", runs.Load(), e.get("old", "out"), e.get("new", "out"))
	}
}

// Two runs of one observer on one change race: at most one commits (they
// conflict on the ack), and the change is processed exactly once.
func TestRacingRunsCommitOnce(t *testing.T) {
	for round := range 20 {
		e := newEnv(t, Options{})
		ctx := context.Background()
		var runs atomic.Int64
		count := func(ctx context.Context, tx *txn.Txn, row, col string) error {
			runs.Add(1)
			v, err := tx.Get(ctx, row, "count")
			n := 0
			if err == nil {
				n, _ = strconv.Atoi(string(v))
			} else if !errors.Is(err, txn.ErrNotFound) {
				return err
			}
			time.Sleep(time.Millisecond) // widen the race
			return tx.Set(row, "count", []byte(strconv.Itoa(n+1)))
		}
		if err := e.f.Register(ctx, Observer{Name: "count", Column: "in", Fn: count}); err != nil {
			t.Fatal(err)
		}
		e.set("r", "in", "x")
		g := e.f.reg.columns()["in"][0]
		var wg sync.WaitGroup
		var commits atomic.Int64
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, ran, _, err := e.f.runOne(ctx, "r", "in", g)
				if err != nil {
					t.Error(err)
				}
				if ok && ran {
					commits.Add(1)
				}
			}()
		}
		wg.Wait()
		if commits.Load() > 1 {
			t.Fatalf("round %d: %d racing runs committed", round, commits.Load())
		}
		e.drain(2)
		if got := e.get("r", "count"); got != "1" {
			t.Fatalf("round %d: the change was processed %s times (runs %d)", round, got, runs.Load())
		}
	}
}

// Clearing deletes only the versions seen and never while a newer write
// is locked or committed.
func TestClearKeepsNewerNotifications(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", new(atomic.Int64))}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "in", "1")
	seen := e.versions("r")
	tx, _ := e.client.Begin(ctx)
	start := tx.StartTS()
	_ = tx.Rollback(ctx)
	e.set("r", "in", "2") // committed after start: the clear must not happen
	if cleared, err := e.f.clear(ctx, []byte("r"), "in", seen, nil, start, false); err != nil || cleared {
		t.Fatalf("clear with a newer commit: cleared %v, err %v", cleared, err)
	}
	all := e.versions("r")
	tx, _ = e.client.Begin(ctx)
	start = tx.StartTS()
	_ = tx.Rollback(ctx)
	if cleared, err := e.f.clear(ctx, []byte("r"), "in", seen, nil, start, false); err != nil || !cleared {
		t.Fatalf("clear: cleared %v, err %v", cleared, err)
	}
	if left := e.versions("r"); len(left) != len(all)-len(seen) || left[0] != all[0] {
		t.Fatalf("after clearing %v of %v: left %v (the newer one must stay)", seen, all, left)
	}
}

func (e *env) versions(row string) []uint64 {
	e.t.Helper()
	ns, err := e.f.notify.Read(context.Background(), []byte(row))
	if err != nil {
		e.t.Fatal(err)
	}
	var ts []uint64
	for _, n := range ns {
		ts = append(ts, n.TS)
	}
	return ts
}

func TestFailuresQuarantineAndRetry(t *testing.T) {
	e := newEnv(t, Options{MaxFailures: 3, RetryBackoff: time.Millisecond})
	ctx := context.Background()
	var broken atomic.Bool
	broken.Store(true)
	var runs atomic.Int64
	fn := func(ctx context.Context, tx *txn.Txn, row, col string) error {
		runs.Add(1)
		if broken.Load() {
			if row == "panic" {
				panic("boom")
			}
			return errors.New("observer bug")
		}
		return tx.Set(row, "out", []byte("ok"))
	}
	if err := e.f.Register(ctx, Observer{Name: "flaky", Column: "in", Fn: fn}); err != nil {
		t.Fatal(err)
	}
	e.set("err", "in", "x")
	e.set("panic", "in", "x")
	e.drain(1)
	q, err := e.f.Quarantine(ctx)
	if err != nil || len(q) != 2 {
		t.Fatalf("quarantine = %+v, %v; want both cells", q, err)
	}
	if q[1].Row != "panic" || q[1].Failures != 3 || q[1].Observer != "flaky" {
		t.Fatalf("quarantine record %+v", q[1])
	}
	if runs.Load() != 6 {
		t.Fatalf("%d runs, want 3 per cell", runs.Load())
	}
	if n := e.pending(); n != 0 {
		t.Fatalf("%d notifications left spinning", n)
	}
	broken.Store(false)
	if n, err := e.f.Retry(ctx, nil); err != nil || n != 2 {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	e.drain(1)
	for _, row := range []string{"err", "panic"} {
		if got := e.get(row, "out"); got != "ok" {
			t.Fatalf("%s after retry: out = %q", row, got)
		}
	}
	if q, _ := e.f.Quarantine(ctx); len(q) != 0 {
		t.Fatalf("quarantine after retry: %+v", q)
	}
	if c := e.counts("flaky"); c["failures"] != 6 || c["quarantined"] != 2 || c["commits"] != 2 {
		t.Fatalf("counts %v", c)
	}
}

func TestWeakNotifications(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	var runs atomic.Int64
	fn := func(ctx context.Context, tx *txn.Txn, row, col string) error {
		runs.Add(1)
		return tx.Set(row, "seen", []byte("yes"))
	}
	if err := e.f.Register(ctx, Observer{Name: "ping", Column: "poke", Weak: true, Fn: fn}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := e.f.Notify(ctx, "r", "poke"); err != nil {
			t.Fatal(err)
		}
	}
	e.drain(1)
	if runs.Load() < 1 || e.get("r", "seen") != "yes" {
		t.Fatalf("weak observer: %d runs, seen %q", runs.Load(), e.get("r", "seen"))
	}
	if err := e.f.Notify(ctx, "", "poke"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Notify with an empty row: %v", err)
	}
}

// notifyAll selects every notification of a row, where notifications share
// the data rows (tests look at the layout directly).
var notifyAll = storage.Filter{{Family: txn.FamilyNotify, AllQualifiers: true}}

// TestGetForUpdateIsNoChange: a lock-only record (txn.GetForUpdate)
// changes no value, so it sets no notification and does not make the
// cell dirty: a notification set by hand over it finds the cell clean.
// An observer that reads its own cell with GetForUpdate runs once per
// change, and is no self-trigger loop.
func TestGetForUpdateIsNoChange(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	var runs atomic.Int64
	copyForUpdate := func(ctx context.Context, tx *txn.Txn, row, col string) error {
		runs.Add(1)
		v, err := tx.GetForUpdate(ctx, row, col)
		if err != nil {
			return err
		}
		return tx.Set(row, "out", v)
	}
	if err := e.f.Register(ctx, Observer{Name: "copy", Column: "in", Fn: copyForUpdate}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "in", "v1")
	e.drain(1)
	if runs.Load() != 1 || e.get("r", "out") != "v1" || e.pending() != 0 {
		t.Fatalf("after a change: %d runs, out %q, %d notifications left; want 1 run, v1, none", runs.Load(), e.get("r", "out"), e.pending())
	}
	e.update(func(tx *txn.Txn) error {
		if _, err := tx.GetForUpdate(ctx, "r", "in"); err != nil {
			return err
		}
		return tx.Set("r", "elsewhere", []byte("x"))
	})
	if n := e.pending(); n != 0 {
		t.Fatalf("a lock-only commit of an observed cell set %d notifications", n)
	}
	tx, _ := e.client.Begin(ctx)
	if err := e.client.Notifications().Set(ctx, [][]byte{[]byte("r")}, "in", tx.StartTS()); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	e.drain(1)
	if runs.Load() != 1 || e.pending() != 0 {
		t.Fatalf("a notification over a lock-only record: %d runs, %d left; want the cell clean, no run", runs.Load(), e.pending())
	}
	if c := e.counts("copy"); c["self_triggers"] != 0 {
		t.Fatalf("counts %v: a read for update counted as a write of the observed cell", c)
	}
}
