package observer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
	"github.com/seed-992972ee/percolator/txn"
)

// apartStore is a shared store whose families share rows (as Cloud
// Bigtable's): notifications live in their own rows, written ahead of the
// prewrites. before, if set, runs before every prewrite (a conditional
// write that sets a lock) reaches the store: the window between a
// notification and its write.
type apartStore struct {
	storagetest.SharedStore
	before func(row []byte)
}

func (apartStore) SharedRows() bool { return true }

func (s apartStore) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if s.before != nil {
		for _, m := range ifFalse {
			if m.Family == txn.FamilyLock && m.Value != nil {
				s.before(row)
				break
			}
		}
	}
	return s.SharedStore.CheckAndMutate(ctx, row, pred, ifTrue, ifFalse)
}

// TestApartLayout: on a store whose families share rows, notifications
// live in rows of their own and nowhere in the data rows, observers
// run and clear them, and status sees them.
func TestApartLayout(t *testing.T) {
	ctx := context.Background()
	st := apartStore{SharedStore: storagetest.SharedStore{Store: memory.New()}}
	e := newEnvOn(t, st, Options{})
	if !e.f.notify.Apart() {
		t.Fatal("the store shares rows, the framework does not keep notifications apart")
	}
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	e.set("r1", "in", "a")
	e.set("r2", "in", "b")
	inData, apart := 0, 0
	if err := st.Scan(ctx, nil, nil, notifyAll, 0, func(r storage.Row) bool {
		switch k := string(r.Key); {
		case k == "r1" || k == "r2":
			inData += len(r.Cells)
		case strings.HasSuffix(k, "r1") || strings.HasSuffix(k, "r2"):
			apart += len(r.Cells)
		default:
			t.Errorf("notifications in row %q", k)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.notify.Scan(ctx, nil, nil, 0, func(row []byte, ns []txn.Notification) bool {
		for _, n := range ns {
			if !n.Ahead {
				t.Errorf("a prewrite's notification %+v of %q not marked as written ahead", n, row)
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if inData != 0 || apart != 2 {
		t.Fatalf("notifications: %d in data rows, %d apart; want 0 and 2", inData, apart)
	}
	s, err := e.f.Status(ctx)
	if err != nil || len(s.Columns) != 1 || s.Columns[0].Pending != 2 {
		t.Fatalf("status: %+v, %v; want 2 pending on in", s.Columns, err)
	}
	if p, err := e.f.PendingNotifications(ctx, 0); err != nil || len(p) != 2 || p[0].Row != "r1" || p[1].Row != "r2" {
		t.Fatalf("pending: %+v, %v", p, err)
	}
	e.drain(2)
	if e.get("r1", "out") != "a" || e.get("r2", "out") != "b" || e.pending() != 0 {
		t.Fatalf("after the drain: out %s %s, %d pending", e.get("r1", "out"), e.get("r2", "out"), e.pending())
	}
}

// TestClearFencesPrewriteBehind: a notification written ahead of its
// prewrite is found, its run finds the cell clean (the prewrite has not
// landed) and clears it. The clear fences the prewrite off: when it lands,
// it fails, and the writer's commit is refused (and retried, with a
// notification of its own) rather than committing a write whose
// notification is gone.
func TestClearFencesPrewriteBehind(t *testing.T) {
	ctx := context.Background()
	hold, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	st := apartStore{SharedStore: storagetest.SharedStore{Store: memory.New()}}
	st.before = func(row []byte) {
		if string(row) == "r" {
			once.Do(func() { close(hold); <-release })
		}
	}
	e := newEnvOn(t, st, Options{})
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	tx, err := e.client.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set("r", "in", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tx.Commit(ctx) }()
	<-hold // the notification is written, the prewrite is held
	e.drain(1)
	if runs.Load() != 0 || e.pending() != 0 {
		t.Fatalf("runs %d, pending %d: want the notification cleared without running (the cell is clean)", runs.Load(), e.pending())
	}
	close(release)
	if err := <-done; !errors.Is(err, txn.ErrConflict) {
		t.Fatalf("the fenced commit: %v, want ErrConflict (a commit here would leave a write without a notification)", err)
	}
	if got := e.get("r", "in"); got != "<none>" {
		t.Fatalf("in = %s after the refused commit", got)
	}
	e.set("r", "in", "v2") // the retry: a new transaction, a new notification
	e.drain(1)
	if got := e.get("r", "out"); got != "v2" {
		t.Fatalf("out = %s, want v2", got)
	}
}

// TestApartNoWriteUnobserved: writers whose prewrites land late (random
// delays after their notifications), on a few rows, race workers that
// clear: every committed value is observed. At the end each row's out
// equals its in.
func TestApartNoWriteUnobserved(t *testing.T) {
	ctx := context.Background()
	st := apartStore{SharedStore: storagetest.SharedStore{Store: memory.New()}}
	st.before = func([]byte) {
		if rand.IntN(3) == 0 {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		}
	}
	e := newEnvOn(t, st, Options{RetryBackoff: time.Millisecond})
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	workers := make(chan error, 1)
	go func() {
		_, err := e.f.Run(wctx, WorkerOptions{Scanners: 3, MaxIdle: time.Millisecond})
		workers <- err
	}()
	const rows, writers = 4, 6
	var wg sync.WaitGroup
	var commits, refused atomic.Int64
	deadline := time.Now().Add(2 * time.Second)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				tx, err := e.client.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				row := fmt.Sprint("r", rand.IntN(rows))
				_ = tx.Set(row, "in", []byte(fmt.Sprint(w, "-", i)))
				switch err := tx.Commit(ctx); {
				case err == nil:
					commits.Add(1)
				case errors.Is(err, txn.ErrConflict):
					refused.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if err := <-workers; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	e.drain(2)
	for r := range rows {
		row := fmt.Sprint("r", r)
		if in, out := e.get(row, "in"), e.get(row, "out"); in != out {
			t.Errorf("%s: in %s, out %s: a committed write was never observed", row, in, out)
		}
	}
	t.Logf("%d commits, %d conflicts, %d runs", commits.Load(), refused.Load(), runs.Load())
	if commits.Load() == 0 {
		t.Fatal("nothing committed: the test checked nothing")
	}
}
