package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
)

// The async figure: the commit latency of two-row write transactions,
// async commits (Options.AsyncCommit; txn/doc.go, "Async commit") beside
// two-phase ones, at asyncWriters writers on rows spread wide enough
// that they rarely conflict, the two sides in alternating turns. Only
// Commit is timed: both sides begin and buffer alike. The target (async
// p50 at most 0.7x two-phase's, 30% lower) is the server suite's, where a two-phase
// commit is three round trips and an async one is one; embedded both
// wait for one log sync, and the figure is printed without a target.
const asyncWriters = 8

// asyncSide is one side's DB and the latencies of its commits.
type asyncSide struct {
	db   *percolator.DB
	mu   sync.Mutex
	lats []time.Duration
}

// commitTwoRows is one transaction of the side: two random rows of a
// wide space, the commit timed.
func (s *asyncSide) commitTwoRows(ctx context.Context, prefix string) func(*rand.Rand) error {
	return func(rng *rand.Rand) error {
		tx, err := s.db.Begin(ctx)
		if err != nil {
			return err
		}
		a, c := rng.IntN(1<<30), rng.IntN(1<<30)
		for _, k := range []int{a, c + 1<<30} {
			if err := tx.Set(fmt.Sprintf("%s%010d", prefix, k), "v", []byte("x")); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
		}
		start := time.Now()
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		d := time.Since(start)
		s.mu.Lock()
		s.lats = append(s.lats, d)
		s.mu.Unlock()
		return nil
	}
}

func embeddedAsync(ctx context.Context, b *runner, r *Report) error {
	return asyncFigure(ctx, b, r, false, func(async bool) (*percolator.DB, error) {
		return percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, fmt.Sprintf("async-%v", async)), AsyncCommit: async})
	})
}

func serverAsync(ctx context.Context, b *runner, r *Report) error {
	return asyncFigure(ctx, b, r, true, func(async bool) (*percolator.DB, error) {
		return b.openServerDB(ctx, percolator.Options{AsyncCommit: async})
	})
}

// asyncFigure measures both sides, each a DB open returns, and reports
// their latencies and, with target, the target: async p50 at most 0.7x
// two-phase's (30% lower).
func asyncFigure(ctx context.Context, b *runner, r *Report, target bool, open func(async bool) (*percolator.DB, error)) error {
	sides := make([]*asyncSide, 2)
	for i, async := range []bool{false, true} {
		db, err := open(async)
		if err != nil {
			return err
		}
		defer db.Close()
		sides[i] = &asyncSide{db: db}
	}
	run := rand.Uint64()
	end := b.timed(ctx, "async: seconds measured", 2*b.opts.Duration)
	rates := alternateAll(ctx, asyncWriters, b.opts.Duration,
		sides[0].commitTwoRows(ctx, fmt.Sprintf("bench-async/%016x/2pc/", run)),
		sides[1].commitTwoRows(ctx, fmt.Sprintf("bench-async/%016x/async/", run)))
	end(nil)
	if err := ctx.Err(); err != nil {
		return err
	}
	if st := sides[1].db.Stats(); st.Async == 0 {
		return fmt.Errorf("%w: async: no commit of the async side was async (%+v)", ErrCheck, st)
	}
	var p50 [2]time.Duration
	for i, name := range []string{"two-phase", "async"} {
		s := sides[i]
		p50[i] = latencyPercentile(s.lats, 50)
		r.printf("async:   %-9s commits of 2 rows at %d writers: p50 %s p99 %s, %.0f txn/s (%d commits)",
			name, asyncWriters, msText(p50[i]), msText(latencyPercentile(s.lats, 99)), rates[i], len(s.lats))
	}
	ratio := show(float64(p50[1])/float64(max(p50[0], time.Microsecond)), 2)
	if !target {
		r.printf("async:   commit p50 async / two-phase = %sx (the target is the server's)", ratio)
		return nil
	}
	r.printf("async:   commit p50 async / two-phase = %sx (target <= 0.7x, 30%% lower: %s)", ratio, r.mark("async commit p50 <= 0.7x two-phase", ratio.atMost(0.7)))
	return nil
}
