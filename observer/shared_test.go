package observer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
	"github.com/seed-992972ee/percolator/txn"
)

// procs are n "processes" on one shared store, with a shared oracle.
func procs(t *testing.T, st storage.Store, n int, views ...func(storage.Store) storage.Store) []*env {
	t.Helper()
	ctx := context.Background()
	alloc, _ := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	orc := oracle.NewClient(alloc)
	t.Cleanup(func() { _ = alloc.Close(); _ = st.Close() })
	var out []*env
	for i := range n {
		var view storage.Store = storagetest.SharedStore{Store: st}
		if i < len(views) && views[i] != nil {
			view = views[i](st)
		}
		c, err := txn.NewClient(ctx, view, orc, coord.TTLOnly{}, txn.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := New(ctx, view, c, orc, coord.NewLocalLocker(), Options{RetryBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		out = append(out, &env{t: t, store: view, client: c, f: f})
	}
	return out
}

func (e *env) drainReport() Report {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := e.f.Run(ctx, WorkerOptions{Scanners: 2, Drain: true, MaxIdle: 5 * time.Millisecond})
	if err != nil {
		e.t.Fatalf("drain: %v", err)
	}
	return rep
}

// TestSharedRegistration: an observer registered by one process is
// notified of writes made through another that opened the store before the
// registration, and that other process neither runs nor clears its
// notifications: its drain reports them as left for their owner.
func TestSharedRegistration(t *testing.T) {
	ctx := context.Background()
	p := procs(t, memory.New(), 2)
	a, b := p[0], p[1]
	var runs atomic.Int64
	if err := a.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		b.set(fmt.Sprint("r", i), "in", "v")
	}
	rep := b.drainReport()
	if len(rep.Unhandled) != 1 || rep.Unhandled[0].Observer != "o" || rep.Unhandled[0].Pending != 5 {
		t.Fatalf("b's drain report %+v: want o with 5 pending", rep)
	}
	if runs.Load() != 0 || b.pending() != 5 {
		t.Fatalf("b ran %d / left %d notifications: want 0 runs and 5 left for o", runs.Load(), b.pending())
	}
	a.drain(2)
	for i := range 5 {
		if got := a.get(fmt.Sprint("r", i), "out"); got != "v" {
			t.Fatalf("r%d out = %q: a write through b was not notified", i, got)
		}
	}
}

// holdPrewrite holds the first prewrite of column col (before it reaches
// the store) until released.
type holdPrewrite struct {
	storage.Store
	col     string
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (h *holdPrewrite) isPrewrite(ifFalse []storage.Mutation) bool {
	return len(ifFalse) > 0 && ifFalse[0].Family == txn.FamilyLock && ifFalse[0].Qualifier == h.col
}

func (h *holdPrewrite) wait() { h.once.Do(func() { close(h.reached); <-h.release }) }

func (h *holdPrewrite) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, t, f []storage.Mutation) (bool, error) {
	if h.isPrewrite(f) {
		h.wait()
	}
	return h.Store.CheckAndMutate(ctx, row, p, t, f)
}

func (h *holdPrewrite) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return h.Store.(storage.Batcher).MutateRows(ctx, rows)
}

type heldExclusive struct {
	*holdPrewrite
	mem *memory.Store
}

func (h heldExclusive) Exclusive() bool { return true }
func (h heldExclusive) SetApplyHook(hook storage.ApplyHook) (func(), error) {
	return h.mem.SetApplyHook(hook)
}
func (h heldExclusive) CheckAndMutateCond(ctx context.Context, row []byte, c storage.Cond, p storage.Filter, t, f []storage.Mutation, d bool) (bool, error) {
	if h.isPrewrite(f) {
		h.wait()
	}
	return h.mem.CheckAndMutateCond(ctx, row, c, p, t, f, d)
}
func (h heldExclusive) CheckAndMutateDeferred(ctx context.Context, row []byte, p storage.Filter, t, f []storage.Mutation) (bool, error) {
	return h.mem.CheckAndMutateDeferred(ctx, row, p, t, f)
}
func (h heldExclusive) MutateRowsDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return h.mem.MutateRowsDeferred(ctx, rows)
}

// TestRegistrationRacesPrewrite: a writer builds its prewrite before an
// observer is registered and sends it after the registration's backfill
// ran (so the backfill found no lock): the writer must notice the newer
// registry before its commit point and notify the write itself. On a
// shared store (the registration in another process) and on an exclusive
// one (in this process).
func TestRegistrationRacesPrewrite(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			ctx := context.Background()
			mem := memory.New()
			h := &holdPrewrite{Store: mem, col: "in", reached: make(chan struct{}), release: make(chan struct{})}
			var writer, registrar *env
			if shared {
				p := procs(t, mem, 2, func(storage.Store) storage.Store { return h })
				writer, registrar = p[0], p[1]
			} else {
				writer = newEnvOn(t, heldExclusive{h, mem}, Options{})
				registrar = writer
			}
			done := make(chan error, 1)
			go func() {
				tx, _ := writer.client.Begin(ctx)
				_ = tx.Set("r", "in", []byte("v"))
				done <- tx.Commit(ctx)
			}()
			<-h.reached // the prewrite is built, under a registry without o
			var runs atomic.Int64
			if err := registrar.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
				t.Fatal(err)
			}
			close(h.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			registrar.drain(1)
			if got := registrar.get("r", "out"); got != "v" || runs.Load() != 1 {
				t.Fatalf("out = %q after %d runs: the write that raced the registration was never notified", got, runs.Load())
			}
		})
	}
}

// failNotifyAfter fails the batched notifications after n succeeded.
type failNotifyAfter struct {
	*memory.Store
	n atomic.Int64
}

func (f *failNotifyAfter) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	if len(rows) > 0 && rows[0].Mutations[0].Family == txn.FamilyNotify && f.n.Add(-1) < 0 {
		return nil, errors.New("injected: disk full")
	}
	return f.Store.MutateRows(ctx, rows)
}

// TestBackfillResumes: a backfill that fails part-way is finished by the
// next Register of the observer, or by the workers; every existing cell is
// processed.
func TestBackfillResumes(t *testing.T) {
	for _, finisher := range []string{"register", "workers"} {
		t.Run(finisher, func(t *testing.T) {
			ctx := context.Background()
			st := &failNotifyAfter{Store: memory.New()}
			st.n.Store(1 << 30)
			e := newEnvOn(t, st, Options{})
			e.f.backfillChunk = 3
			for i := range 10 {
				e.set(fmt.Sprint("r", i), "in", "v")
			}
			st.n.Store(1) // the second chunk's notifications fail
			var runs atomic.Int64
			o := Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}
			if err := e.f.Register(ctx, o); err == nil {
				t.Fatal("Register with a failing backfill returned nil")
			}
			st.n.Store(1 << 30)
			if finisher == "register" {
				if err := e.f.Register(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			e.drain(2)
			for i := range 10 {
				if got := e.get(fmt.Sprint("r", i), "out"); got != "v" {
					t.Fatalf("r%d never processed after the backfill was resumed by %s", i, finisher)
				}
			}
			if g := e.f.reg.set().lookup("o"); g == nil || g.backfill {
				t.Fatalf("registration after the finished backfill: %+v", g)
			}
		})
	}
}

// TestObserverCannotEndItsTxn: an observer's Commit and Rollback fail with
// ErrManaged and change nothing. One that ignores the error is committed
// once by the framework; one that returns it fails and is quarantined,
// and the drain ends.
func TestObserverCannotEndItsTxn(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{MaxFailures: 2, RetryBackoff: time.Millisecond})
	var ignored, returned atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "ignores", Column: "a", Fn: func(ctx context.Context, tx *txn.Txn, row, col string) error {
		ignored.Add(1)
		if err := tx.Commit(ctx); !errors.Is(err, txn.ErrManaged) {
			return fmt.Errorf("Commit in an observer: %v", err)
		}
		if err := tx.Rollback(ctx); !errors.Is(err, txn.ErrManaged) {
			return fmt.Errorf("Rollback in an observer: %v", err)
		}
		return tx.Set(row, "a_out", []byte("done"))
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Register(ctx, Observer{Name: "returns", Column: "b", Fn: func(ctx context.Context, tx *txn.Txn, row, col string) error {
		returned.Add(1)
		return tx.Commit(ctx)
	}}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "a", "1")
	e.set("r", "b", "1")
	e.drain(2)
	if ignored.Load() != 1 || e.get("r", "a_out") != "done" {
		t.Fatalf("observer ignoring ErrManaged: %d runs, a_out %q; want 1 run, committed", ignored.Load(), e.get("r", "a_out"))
	}
	if q := e.counts("returns")["quarantined"]; q != 1 || returned.Load() != 2 {
		t.Fatalf("observer returning ErrManaged: %d runs, quarantined %d; want 2 and 1", returned.Load(), q)
	}
}

// TestPersistentErrorQuarantined: a corrupt commit record makes every
// dirty check fail; that is a failure of the observer on that cell,
// quarantined after MaxFailures, and the drain ends.
func TestPersistentErrorQuarantined(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{MaxFailures: 3, RetryBackoff: time.Millisecond})
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "in", "v")
	rec, err := e.store.ReadRow(ctx, []byte("r"), storage.Filter{{Family: txn.FamilyWrite, Qualifier: "in"}})
	if err != nil || len(rec.Cells) != 1 {
		t.Fatalf("commit record: %+v, %v", rec.Cells, err)
	}
	if err := e.store.Mutate(ctx, []byte("r"), storage.SetCell(txn.FamilyWrite, "in", rec.Cells[0].TS, []byte("corrupt"))); err != nil {
		t.Fatal(err)
	}
	e.drain(1)
	q, err := e.f.Quarantine(ctx)
	if err != nil || len(q) != 1 || e.pending() != 0 || q[0].Observer != "o" || !strings.Contains(q[0].Error, "checking whether the cell changed") {
		t.Fatalf("quarantine %+v, %v: want o's notification with the dirty check's error", q, err)
	}
}

// TestSelfTriggerLoop: an observer that writes the cell it observes on
// every run is stopped as a loop (quarantined, counted in status); one
// that writes it once (normalizing) is not.
func TestSelfTriggerLoop(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{})
	if err := e.f.Register(ctx, Observer{Name: "loop", Column: "a", Fn: func(ctx context.Context, tx *txn.Txn, row, col string) error {
		v, _ := tx.Get(ctx, row, col)
		return tx.Set(row, col, append(v, '+'))
	}}); err != nil {
		t.Fatal(err)
	}
	var norm atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "normalize", Column: "b", Fn: func(ctx context.Context, tx *txn.Txn, row, col string) error {
		norm.Add(1)
		v, _ := tx.Get(ctx, row, col)
		if up := strings.ToUpper(string(v)); up != string(v) {
			return tx.Set(row, col, []byte(up))
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "a", "x")
	e.set("r", "b", "x")
	e.drain(1)
	c := e.counts("loop")
	if c["quarantined"] != 1 || c["self_triggers"] < selfTriggerLimit {
		t.Fatalf("loop counters %v: want quarantined and >= %d self-triggers", c, selfTriggerLimit)
	}
	if c := e.counts("normalize"); c["quarantined"] != 0 || norm.Load() != 2 || e.get("r", "b") != "X" {
		t.Fatalf("normalizing observer: %v, %d runs, b=%q; want 2 runs, no quarantine", c, norm.Load(), e.get("r", "b"))
	}
}

// TestUnregister: after Unregister no write notifies the observer, its
// code does not run, and the notifications of its column are cleared.
func TestUnregister(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{})
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	e.set("r1", "in", "v")
	if err := e.f.Unregister(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Unregister(ctx, "o"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("second Unregister: %v", err)
	}
	e.set("r2", "in", "v")
	if n := e.pending(); n != 1 {
		t.Fatalf("%d notifications, want only r1's (from before Unregister)", n)
	}
	e.drain(1)
	if runs.Load() != 0 || e.pending() != 0 {
		t.Fatalf("after Unregister: %d runs, %d notifications left; want 0 and 0", runs.Load(), e.pending())
	}
}
