package observer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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

// flakyLocker is a coordination service that fails a share of its calls,
// as etcd does while it restarts ("taking an advisory lock: EOF") or while
// a session's lease is granted again.
type flakyLocker struct {
	coord.Locker
	mu   sync.Mutex
	rng  *rand.Rand
	odds float64
	down atomic.Bool // every call fails
	n    atomic.Int64
}

var errLockerDown = errors.New("etcd: taking an advisory lock: EOF (injected)")

func (l *flakyLocker) TryLock(ctx context.Context, key, owner string) (func(), bool, error) {
	l.mu.Lock()
	fail := l.down.Load() || l.rng.Float64() < l.odds
	l.mu.Unlock()
	if fail {
		l.n.Add(1)
		return nil, false, errLockerDown
	}
	return l.Locker.TryLock(ctx, key, owner)
}

// TestScannersRideOutOutages: advisory locks and notification scans that
// fail for a while — a stretch where every lock fails, then one call in
// four, with scans, reads and writes failing at random beneath — do not end
// the worker: it backs off, scans again, and every change is processed.
// (A scanner used to return the first such error, ending Run: `index` and
// `worker` exited 1 when etcd was killed.)
func TestScannersRideOutOutages(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	ctx := context.Background()
	inner := memory.New()
	st, lossy := storagetest.NewLossy(inner, storagetest.LossyOptions{Seed: seed, FailBefore: 0.02, LoseReply: 0.02, ReadFail: 0.05})
	lossy.SetEnabled(false)
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
	locker := &flakyLocker{Locker: coord.NewLocalLocker(), rng: rand.New(rand.NewPCG(seed, 1)), odds: 0.25}
	f, err := New(ctx, st, c, orc, locker, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); _ = alloc.Close(); _ = inner.Close() })
	e := &env{t: t, store: inner, client: c, f: f}
	var runs atomic.Int64
	if err := f.Register(ctx, Observer{Name: "copy", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	const rows = 40
	for i := range rows {
		e.set(fmt.Sprintf("r%02d", i), "in", fmt.Sprint("v", i))
	}
	locker.down.Store(true)
	lossy.SetEnabled(true)
	go func() {
		time.Sleep(300 * time.Millisecond) // the stretch every lock fails
		locker.down.Store(false)
	}()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // only a hang reaches it
	defer cancel()
	if _, err := f.Run(rctx, WorkerOptions{Scanners: 3, Drain: true, MaxIdle: 5 * time.Millisecond}); err != nil {
		t.Fatalf("drain through the outage: %v (locks failed %d times, store faults %+v)", err, locker.n.Load(), lossy.Stats())
	}
	lossy.SetEnabled(false)
	for i := range rows {
		if got, want := e.get(fmt.Sprintf("r%02d", i), "out"), fmt.Sprint("v", i); got != want {
			t.Errorf("r%02d out = %q, want %q", i, got, want)
		}
	}
	if locker.n.Load() == 0 {
		t.Fatal("no lock failed: the test tested nothing")
	}
	t.Logf("locks failed %d times; store faults %+v; %d runs", locker.n.Load(), lossy.Stats(), runs.Load())
}

// TestScannerFatalErrorsEndRun: what no retry mends still ends Run: a
// store that failed (its log sync) refuses everything until reopened.
func TestScannerFatalErrorsEndRun(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	if err := e.f.Register(ctx, Observer{Name: "copy", Column: "in", Fn: copyTo("out", new(atomic.Int64))}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "in", "v")
	for _, want := range []error{storage.ErrFailed, storage.ErrBudgetSpent} {
		e.f.locker = failingLocker{fmt.Errorf("wrapped: %w: %w", storage.ErrUnavailable, want)}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := e.f.Run(rctx, WorkerOptions{Drain: true})
		cancel()
		if !errors.Is(err, want) {
			t.Fatalf("Run: %v, want %v", err, want)
		}
	}
}

type failingLocker struct{ err error }

func (l failingLocker) TryLock(context.Context, string, string) (func(), bool, error) {
	return nil, false, l.err
}

// TestOutageQuarantinesNothing: a store that cannot be reached for the
// data rows' writes for a while (storage.ErrUnavailable) fails observer
// runs at their commit, again and again; that is the store's failure, not
// the observer's, so nothing is quarantined (MaxFailures 2 would, had they
// been counted: the quarantine's own writes still land) and every change
// is processed once the store is back.
func TestOutageQuarantinesNothing(t *testing.T) {
	ctx := context.Background()
	st := &rowsDown{Store: memory.New()}
	e := newEnvOn(t, st, Options{MaxFailures: 2})
	var runs atomic.Int64
	if err := e.f.Register(ctx, Observer{Name: "copy", Column: "in", Fn: copyTo("out", &runs)}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.set(fmt.Sprintf("r%d", i), "in", fmt.Sprint("v", i))
	}
	st.down.Store(true)
	go func() {
		for runs.Load() < 20 { // runs that failed at their commit
			time.Sleep(time.Millisecond)
		}
		st.down.Store(false)
	}()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // only a hang reaches it
	defer cancel()
	if _, err := e.f.Run(rctx, WorkerOptions{Scanners: 2, Drain: true, MaxIdle: 5 * time.Millisecond}); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if q, err := e.f.Quarantine(ctx); err != nil || len(q) != 0 {
		t.Fatalf("quarantined after an outage: %v %v (runs %d, counts %v)", q, err, runs.Load(), e.counts("copy"))
	}
	for i := range 5 {
		if got, want := e.get(fmt.Sprintf("r%d", i), "out"), fmt.Sprint("v", i); got != want {
			t.Errorf("r%d out = %q, want %q", i, got, want)
		}
	}
}

// rowsDown fails the conditional writes of the data rows ("r…") while
// down, as a store that cannot be reached does.
type rowsDown struct {
	storage.Store
	down atomic.Bool
}

func (s *rowsDown) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	if s.down.Load() && len(row) > 0 && row[0] == 'r' {
		return false, fmt.Errorf("store unreachable (injected): %w", storage.ErrUnavailable)
	}
	return s.Store.CheckAndMutate(ctx, row, p, a, b)
}

// flakyMembership fails its first fails registrations, as a coordination
// service that is down when a worker starts.
type flakyMembership struct {
	coord.Membership
	mu    sync.Mutex
	fails int
	tried int
}

func (m *flakyMembership) Register(ctx context.Context, group, value string) error {
	m.mu.Lock()
	m.tried++
	fail := m.tried <= m.fails
	m.mu.Unlock()
	if fail {
		return errors.New("etcd: registering in group: rpc error: code = Unavailable desc = error reading from server: EOF")
	}
	return m.Membership.Register(ctx, group, value)
}

func (m *flakyMembership) attempts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tried
}

// TestWorkerStartsWhileCoordinationIsDown: a partitioned worker whose
// group registration fails at start (etcd restarting) does not end: it
// scans the whole keyspace meanwhile, registers once the service answers,
// and then follows the group's split. A drain started so finishes. A
// group name the services refuse is refused before anything runs.
func TestWorkerStartsWhileCoordinationIsDown(t *testing.T) {
	c := newCluster(t, memory.New(), 1)
	var rows []string
	for i := range 40 {
		rows = append(rows, fmt.Sprintf("r%03d", i))
	}
	c.write("c", rows)
	m := &flakyMembership{Membership: c.members[0], fails: 2}
	r := c.start(0, WorkerOptions{Scanners: 2, MaxIdle: 5 * time.Millisecond, Membership: m})
	waitFor(t, "the worker registers after its failed attempts", func() bool {
		_, ok := c.workers[0].f.Partition()
		return ok
	})
	if n := m.attempts(); n != 3 {
		t.Fatalf("%d registrations tried, want 3 (two failed, then one that held)", n)
	}
	waitFor(t, "every change is processed", func() bool { return len(c.pending("c")) == 0 })
	if err := r.stop(); err != nil {
		t.Fatalf("worker: %v", err)
	}
	c.checkProcessed(rows)

	c.write("c", rows[:5])
	m = &flakyMembership{Membership: c.members[0], fails: 1 << 30} // never back
	if err := c.start(0, WorkerOptions{Scanners: 2, MaxIdle: 5 * time.Millisecond, Membership: m, Drain: true}).wait(); err != nil {
		t.Fatalf("a drain while registration fails: %v", err)
	}
	if p := c.pending("c"); len(p) != 0 {
		t.Fatalf("%d rows left notified by a drain that could not register", len(p))
	}

	err := c.start(0, WorkerOptions{Membership: c.members[0], Group: "a/b"}).wait()
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("group a/b: %v, want ErrInvalidArgument", err)
	}
}
