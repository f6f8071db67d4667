package graph

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

var ctx = context.Background()

var errInjected = errors.New("injected store failure")

// faultStore wraps a store: calls fail before or after being applied with
// the given probabilities (S2Graph's FailProb), writes can be sent twice,
// and hooks run before reads and conditional writes of a row. A store
// that crashed fails every call from then on.
type faultStore struct {
	storage.Store
	mu          sync.Mutex
	rng         *rand.Rand
	failBefore  float64
	failAfter   float64
	dup         bool
	crashAfter  atomic.Int64 // calls left before the crash; <0: never
	crashed     atomic.Bool
	afterRead   func(ctx context.Context, row []byte) // after the read, before it returns
	beforeCAS   func(ctx context.Context, row []byte)
	afterCAS    func(ctx context.Context, row []byte)
	afterScan   func(ctx context.Context, start []byte) // after the scan, before it returns
	calls, errs atomic.Int64
}

func newFaultStore(st storage.Store, seed uint64) *faultStore {
	f := &faultStore{Store: st, rng: rand.New(rand.NewPCG(seed, 7))}
	f.crashAfter.Store(-1)
	return f
}

func (f *faultStore) roll(p float64) bool {
	if p == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < p
}

// enter counts a call and reports whether the store is (now) down.
func (f *faultStore) enter() error {
	f.calls.Add(1)
	if f.crashed.Load() || (f.crashAfter.Load() >= 0 && f.crashAfter.Add(-1) < 0) {
		f.crashed.Store(true)
		return errors.New("crashed")
	}
	if f.roll(f.failBefore) {
		f.errs.Add(1)
		return errInjected
	}
	return nil
}

func (f *faultStore) after(err error) error {
	if err == nil && f.roll(f.failAfter) {
		f.errs.Add(1)
		return errInjected // applied, reported failed
	}
	return err
}

func (f *faultStore) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := f.enter(); err != nil {
		return storage.Row{}, err
	}
	r, err := f.Store.ReadRow(ctx, row, filter)
	if f.afterRead != nil {
		f.afterRead(ctx, row)
	}
	return r, err
}

func (f *faultStore) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	if err := f.enter(); err != nil {
		return err
	}
	err := f.Store.Scan(ctx, start, end, filter, limit, fn)
	if f.afterScan != nil {
		f.afterScan(ctx, start)
	}
	return err
}

func (f *faultStore) Mutate(ctx context.Context, row []byte, muts ...storage.Mutation) error {
	if err := f.enter(); err != nil {
		return err
	}
	err := f.Store.Mutate(ctx, row, muts...)
	if f.dup && err == nil {
		_ = f.Store.Mutate(ctx, row, muts...)
	}
	return f.after(err)
}

func (f *faultStore) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := f.enter(); err != nil {
		return false, err
	}
	if f.beforeCAS != nil {
		f.beforeCAS(ctx, row)
	}
	m, err := f.Store.CheckAndMutate(ctx, row, pred, ifTrue, ifFalse)
	if f.dup && err == nil {
		_, _ = f.Store.CheckAndMutate(ctx, row, pred, ifTrue, ifFalse)
	}
	if f.afterCAS != nil {
		f.afterCAS(ctx, row)
	}
	return m, f.after(err)
}

func (f *faultStore) Increment(ctx context.Context, row []byte, fam, q string, d int64) (int64, error) {
	if err := f.enter(); err != nil {
		return 0, err
	}
	n, err := f.Store.Increment(ctx, row, fam, q, d)
	if f.dup && err == nil {
		n, err = f.Store.Increment(ctx, row, fam, q, d)
	}
	return n, f.after(err)
}

// clock is a wall clock tests move.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) add(d time.Duration) { c.off.Add(int64(d)) }

var rates = Label{
	Name:    "rates",
	Props:   map[string]Type{"rating": Float, "note": String, "visits": Int},
	Indexes: []Index{{Name: "by_rating", Props: []string{"rating"}}, {Name: "by_note", Props: []string{"note", "rating"}}},
}

// newGraph is a graph on a fresh memory store with the rates label, and
// the store.
func newGraph(t *testing.T, opts Options) (*Graph, storage.Store) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { st.Close() })
	g := New(st, opts)
	if err := g.CreateLabel(ctx, rates); err != nil {
		t.Fatal(err)
	}
	return g, st
}

func mustMutate(t *testing.T, g *Graph, m Mutation) Result {
	t.Helper()
	r, err := g.Mutate(ctx, m)
	if err != nil {
		t.Fatalf("%v %s->%s at %d: %v", m.Op, m.Src, m.Tgt, m.TS, err)
	}
	return r
}

func rating(f float64) Props { return Props{"rating": FloatValue(f)} }

func checkClean(t *testing.T, g *Graph, label string) Report {
	t.Helper()
	rep, err := g.Check(ctx, label)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Mismatches) > 0 {
		t.Fatalf("check: %d mismatches:\n%v", len(rep.Mismatches), rep.Mismatches)
	}
	return rep
}

// ratingsOut lists the ratings of v's out-edges in rating order.
func ratingsOut(t *testing.T, g *Graph, v string) []float64 {
	t.Helper()
	es, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: v, Dir: Out})
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, e := range es {
		out = append(out, e.Props["rating"].F)
	}
	return out
}

// newGraphOf is a graph whose rates label has consistency c, on an
// embedded percolator DB (whose store also holds the strong labels'
// cells).
func newGraphOf(t *testing.T, c Consistency) *Graph {
	t.Helper()
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	g := New(db.Store(), Options{DB: db})
	l := rates
	l.Consistency = c
	if err := g.CreateLabel(ctx, l); err != nil {
		t.Fatal(err)
	}
	return g
}
