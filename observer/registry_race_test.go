package observer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// beforeRegMutate runs fn once, just before the first Mutate of a
// registration cell (FamilyObservers) goes through this view.
type beforeRegMutate struct {
	storage.Store
	once sync.Once
	fn   func()
}

func (b *beforeRegMutate) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	if len(ms) > 0 && ms[0].Family == FamilyObservers {
		b.once.Do(b.fn)
	}
	return b.Store.Mutate(ctx, row, ms...)
}

func (b *beforeRegMutate) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return b.Store.(storage.Batcher).MutateRows(ctx, rows)
}

// registerRace returns processes A and B on one shared store, arranged so
// that B registers observer oy (column y) completely just before A's next
// Register stores its registration, and oy's run counter.
func registerRace(t *testing.T) (a, b *env, runsY *atomic.Int64) {
	view := &beforeRegMutate{}
	p := procs(t, memory.New(), 2, func(st storage.Store) storage.Store { view.Store = storagetest.SharedStore{Store: st}; return view }, nil)
	a, b, runsY = p[0], p[1], new(atomic.Int64)
	view.fn = func() {
		if err := b.f.Register(context.Background(), Observer{Name: "oy", Column: "y", Fn: copyTo("y_out", runsY)}); err != nil {
			t.Errorf("B.Register: %v", err)
		}
	}
	return a, b, runsY
}

// TestConcurrentRegisterStaleSet: processes A and B share a store.
// A's Register(X) loads the registry, then (before A stores X) B registers
// Y completely. A then stores X, bumps the version and publishes
// "its loaded set + X" under the *new* stored version. A's set lacks Y
// but carries the current version, so A's Refresh never reloads:
//  1. a write of Y's column through A sets no notification (invariant 2);
//  2. A's scanner treats B's notification of Y as an orphan and clears it
//     (invariant 1: cleared for an observer A has not loaded).
func TestConcurrentRegisterStaleSet(t *testing.T) {
	ctx := context.Background()
	a, b, _ := registerRace(t)
	var runsX atomic.Int64
	if err := a.f.Register(ctx, Observer{Name: "ox", Column: "x", Fn: copyTo("x_out", &runsX)}); err != nil {
		t.Fatal(err)
	}
	_, av := a.f.reg.Snapshot()
	sv, _ := a.f.reg.storedVersion(ctx)
	t.Logf("A's set: version %d, observes y: %v; stored version %d", av, a.f.reg.set().observed("y"), sv)

	// 1. A write of y through A.
	a.set("ra", "y", "va")
	b.drainReport()
	if got := b.get("ra", "y_out"); got != "va" {
		t.Errorf("ra: write of observed column y through A never processed by oy (y_out=%q): no notification was set", got)
	}
}

// TestConcurrentRegisterOrphanClear: same race, with A's workers
// already running when A registers (a registration at run time). A write
// of y through B is notified (B reloads), and A's running scanner, whose
// refresh keeps the stale set, clears it as an orphan: oy never runs.
func TestConcurrentRegisterOrphanClear(t *testing.T) {
	ctx := context.Background()
	a, b, runsY := registerRace(t)
	var runsX atomic.Int64
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := a.f.Run(runCtx, WorkerOptions{MaxIdle: time.Millisecond}); done <- err }()
	time.Sleep(20 * time.Millisecond) // A's scanners are past finishBackfills
	if err := a.f.Register(ctx, Observer{Name: "ox", Column: "x", Fn: copyTo("x_out", &runsX)}); err != nil {
		t.Fatal(err)
	}
	b.set("rb", "y", "vb")
	deadline := time.Now().Add(2 * time.Second)
	for b.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	t.Logf("notifications left after A's scanners ran: %d", b.pending())
	b.drainReport()
	if got := b.get("rb", "y_out"); got != "vb" {
		t.Errorf("rb: B's notification of y was cleared by A's scanner, which has not loaded oy (y_out=%q, oy runs=%d)", got, runsY.Load())
	}
}

// TestRegisterPublishesWhole: Register raises s.version on the
// regSet that loadLocked already published (r.cur), while committers and
// scanners read it lock-free: a data race, and a window (which includes
// building the copy s.with) in which Snapshot returns the set WITHOUT the
// new observer under the NEW version. A committer that builds its
// prewrites there and refreshes after the publish sees "no change"
// (equal versions) and writes no notification, while the backfill may
// already have passed its row: a missed notification (invariant 2).
// Registration i (column c<i>) raises the version to i+1 in a fresh store,
// so a snapshot at version v must observe c<v-1>.
func TestRegisterPublishesWhole(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stale atomic.Int64
	var example atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			obs, v := e.f.reg.Snapshot()
			if v > 0 && (obs == nil || !obs(fmt.Sprint("c", v-1))) {
				stale.Add(1)
				example.Store(fmt.Sprintf("Snapshot() = version %d without column c%d", v, v-1))
			}
		}
	}()
	var runs atomic.Int64
	for i := range 300 {
		if err := e.f.Register(ctx, Observer{Name: fmt.Sprint("o", i), Column: fmt.Sprint("c", i), Fn: copyTo("out", &runs)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := stale.Load(); n > 0 {
		t.Errorf("%d snapshots carried a registration's new version without its column, e.g. %v", n, example.Load())
	}
}

// slowPrewrite is an exclusive memory store whose prewrites (a
// conditional write whose ifFalse puts a lock) reach the store after a
// delay, as a slow network or a busy store would make them.
type slowPrewrite struct {
	*memory.Store
	delay time.Duration
}

func isPrewrite(ifFalse []storage.Mutation) bool {
	return len(ifFalse) > 0 && ifFalse[0].Family == "lock"
}

func (s slowPrewrite) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, t, f []storage.Mutation) (bool, error) {
	if isPrewrite(f) {
		time.Sleep(s.delay)
	}
	return s.Store.CheckAndMutate(ctx, row, p, t, f)
}

func (s slowPrewrite) CheckAndMutateCond(ctx context.Context, row []byte, c storage.Cond, p storage.Filter, t, f []storage.Mutation, d bool) (bool, error) {
	if isPrewrite(f) {
		time.Sleep(s.delay)
	}
	return s.Store.CheckAndMutateCond(ctx, row, c, p, t, f, d)
}

// TestRegisterWindowLosesNoNotification: the end-to-end consequence
// of the published-set mutation, in ONE process on an exclusive store.
// Committers write fresh rows of the column being registered while
// Register runs. No worker runs, so once every Register has returned,
// every committed write of a registered column must carry a notification
// (set by its prewrite, by notifyMissed, or by the backfill).
func TestRegisterWindowLosesNoNotification(t *testing.T) {
	ctx := context.Background()
	e := newEnvOn(t, slowPrewrite{Store: memory.New(), delay: 5 * time.Millisecond}, Options{})
	var cur atomic.Int64
	cur.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := map[string]string{} // row → column
	for w := range 128 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				i := cur.Load()
				if i < 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				col := fmt.Sprint("c", i)
				row := fmt.Sprintf("%s/w%d/%d", col, w, n)
				tx, err := e.client.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_ = tx.Set(row, col, []byte("v"))
				if err := tx.Commit(ctx); err != nil {
					continue
				}
				mu.Lock()
				written[row] = col
				mu.Unlock()
			}
		}()
	}
	var runs atomic.Int64
	const n = 60
	for i := range n {
		cur.Store(int64(i))
		if err := e.f.Register(ctx, Observer{Name: fmt.Sprint("o", i), Column: fmt.Sprint("c", i), Fn: copyTo("out", &runs)}); err != nil {
			t.Fatal(err)
		}
	}
	cur.Store(-1)
	close(stop)
	wg.Wait()
	notified := map[string]bool{}
	if err := e.store.Scan(ctx, nil, nil, notifyAll, 0, func(r storage.Row) bool {
		for _, c := range r.Cells {
			notified[string(r.Key)+"|"+c.Qualifier] = true
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for row, col := range written {
		if !notified[row+"|"+col] {
			if lost++; lost <= 5 {
				t.Errorf("committed write %s/%s of an observed column has no notification", row, col)
			}
		}
	}
	t.Logf("%d of %d committed writes have no notification", lost, len(written))
}
