package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/graph"
	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/shared"
)

// countStore counts the store calls made through it.
type countStore struct {
	shared.Store
	n *atomic.Int64
}

func (c countStore) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	c.n.Add(1)
	return c.Store.ReadRow(ctx, row, f)
}

func (c countStore) Scan(ctx context.Context, s, e []byte, f storage.Filter, limit int, fn func(storage.Row) bool) error {
	c.n.Add(1)
	return c.Store.Scan(ctx, s, e, f, limit, fn)
}

func (c countStore) Mutate(ctx context.Context, row []byte, m ...storage.Mutation) error {
	c.n.Add(1)
	return c.Store.Mutate(ctx, row, m...)
}

func (c countStore) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, t, f []storage.Mutation) (bool, error) {
	c.n.Add(1)
	return c.Store.CheckAndMutate(ctx, row, p, t, f)
}

func (c countStore) Increment(ctx context.Context, row []byte, fam, q string, d int64) (int64, error) {
	c.n.Add(1)
	return c.Store.Increment(ctx, row, fam, q, d)
}

func (c countStore) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	c.n.Add(1)
	return c.Store.MutateRows(ctx, rows)
}

// graphRun is one measured configuration.
type graphRun struct {
	mutations       int
	rate            float64
	p50, p99        time.Duration
	retries         int64
	callsPerMut     float64
	callsCountedOff string
}

// graphFigure: the graph's strong (S2Graph's protocol), weak and txn
// labels on the embedded store, under contention (the writers on 10
// edges) and without (on 1,000,000): mutations/s, p50/p99 latency,
// retries, and store calls per mutation.
func graphFigure(ctx context.Context, b *runner, r *Report) error {
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, "graph")})
	if err != nil {
		return err
	}
	defer db.Close()
	var txnCalls atomic.Int64
	cdb, closeCounted, err := openCountedDB(ctx, &txnCalls)
	if err != nil {
		return err
	}
	defer closeCounted()
	r.printf("graph: %d writers, %s per run; store calls of txn counted on a shared memory store", b.opts.Writers, b.opts.Duration)
	r.printf("graph: %-12s %-11s %10s %10s %10s %9s %12s", "edges", "label", "mut/s", "p50", "p99", "retries", "calls/mut")
	rates := map[string]float64{}
	for _, edges := range []int{10, 1_000_000} {
		for _, c := range []graph.Consistency{graph.Strong, graph.Weak, graph.Txn} {
			m, err := b.measureGraph(ctx, db, cdb, &txnCalls, c, edges)
			if err != nil {
				return err
			}
			r.printf("graph: %-12d %-11s %10.0f %10s %10s %9d %12.2f", edges, c, m.rate, m.p50.Round(time.Microsecond), m.p99.Round(time.Microsecond), m.retries, m.callsPerMut)
			rates[fmt.Sprint(edges, c)] = m.rate
		}
	}
	strongFree, weakFree := rates[fmt.Sprint(1_000_000, graph.Strong)], rates[fmt.Sprint(1_000_000, graph.Weak)]
	strongHot, txnHot := rates[fmt.Sprint(10, graph.Strong)], rates[fmt.Sprint(10, graph.Txn)]
	free, hot := show(strongFree/weakFree, 2), show(txnHot/strongHot, 2)
	r.printf("graph: strong vs weak without contention: %sx (target >= 0.5x: %s)", free, r.mark("graph strong >= 0.5x weak without contention", free.atLeast(0.5)))
	r.printf("graph: txn vs strong under contention: %sx (target >= 1x: %s)", hot, r.mark("graph txn >= strong under contention", hot.atLeast(1)))
	return nil
}

// openCountedDB opens the DB on which the store calls of txn mutations
// are counted (into calls): a shared memory store, counted (the embedded
// store's calls cannot be counted without losing its lock index).
func openCountedDB(ctx context.Context, calls *atomic.Int64) (*percolator.DB, func(), error) {
	mem := memory.New()
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		_ = mem.Close()
		return nil, nil, err
	}
	cdb, err := percolator.Open(ctx, percolator.Options{Store: countStore{shared.Store{Store: mem}, calls}, Oracle: oracle.NewClient(alloc)})
	if err != nil {
		_ = alloc.Close()
		_ = mem.Close()
		return nil, nil, err
	}
	return cdb, func() { _ = cdb.Close(); _ = alloc.Close(); _ = mem.Close() }, nil
}

// measureGraph measures one label of consistency c on edges edges.
func (b *runner) measureGraph(ctx context.Context, db, cdb *percolator.DB, txnCalls *atomic.Int64, c graph.Consistency, edges int) (graphRun, error) {
	var calls atomic.Int64
	// The graph's own cells: the store behind the DB's user view, counted.
	store := storage.Store(countStore{shared.Store{Store: userstore.Raw(db.Store())}, &calls})
	g := graph.New(store, graph.Options{DB: db, MaxBackOff: 20 * time.Millisecond, MaxRetries: 50})
	label := graph.Label{
		Name:        fmt.Sprintf("bench%d", b.labels.Add(1)),
		Props:       map[string]graph.Type{"rating": graph.Float},
		Indexes:     []graph.Index{{Name: "by_rating", Props: []string{"rating"}}},
		Consistency: c,
	}
	if err := g.CreateLabel(ctx, label); err != nil {
		return graphRun{}, err
	}
	var ts atomic.Int64
	ts.Store(time.Now().UnixMicro())
	mutation := func(rng *rand.Rand) graph.Mutation {
		e := rng.IntN(edges)
		return graph.Mutation{Op: graph.Update, Label: label.Name, Src: fmt.Sprint("v", e%1000), Tgt: fmt.Sprint("w", e),
			TS: ts.Add(1), Props: graph.Props{"rating": graph.FloatValue(float64(rng.IntN(50)) / 10)}}
	}
	conflicts0 := db.Stats().Conflicts
	end := b.timed(ctx, "graph: seconds measured", b.opts.Duration)
	lats, err := mutateFor(ctx, g, b.opts.Writers, b.opts.Duration, uint64(edges), mutation)
	end(err)
	if err != nil {
		return graphRun{}, err
	}
	r := graphRun{mutations: len(lats), rate: float64(len(lats)) / b.opts.Duration.Seconds()}
	if len(lats) > 0 {
		r.p50, r.p99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	if c != graph.Txn {
		r.retries = g.Stats().LockRetries
		r.callsPerMut = float64(calls.Load()) / float64(max(1, len(lats)))
		return r, nil
	}
	r.retries = int64(db.Stats().Conflicts - conflicts0)
	r.callsPerMut, err = txnCallsPerMutation(ctx, cdb, txnCalls, label, mutation)
	return r, err
}

// mutateFor runs mutations from writers goroutines for d and returns
// their latencies, sorted; the first mutation that fails stops its
// writer and is the error.
func mutateFor(ctx context.Context, g *graph.Graph, writers int, d time.Duration, seed uint64, mutation func(*rand.Rand) graph.Mutation) ([]time.Duration, error) {
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
		errs = make(chan error, writers)
	)
	deadline := time.Now().Add(d)
	for i := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), seed))
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				if _, err := g.Mutate(ctx, mutation(rng)); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	slices.Sort(lats)
	return lats, <-errs
}

// txnCallsPerMutation counts the store calls of 200 mutations of the
// same mix on a txn label, one at a time, on the counted DB.
func txnCallsPerMutation(ctx context.Context, cdb *percolator.DB, txnCalls *atomic.Int64, label graph.Label, mutation func(*rand.Rand) graph.Mutation) (float64, error) {
	cg := graph.New(cdb.Store(), graph.Options{DB: cdb})
	if err := cg.CreateLabel(ctx, label); err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(1, 1))
	n0 := txnCalls.Load()
	for range 200 {
		if _, err := cg.Mutate(ctx, mutation(rng)); err != nil {
			return 0, err
		}
	}
	return float64(txnCalls.Load()-n0) / 200, nil
}
