package bench

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/lock"
	"github.com/seed-992972ee/percolator/storage"
)

// spinLock is the baseline: a plain compare-and-set spin lock on one cell
// (no lease, no token, no fairness, no clock).
type spinLock struct {
	st  storage.Store
	row []byte
}

func (s spinLock) acquire(ctx context.Context) error {
	for {
		taken, err := s.st.CheckAndMutate(ctx, s.row, storage.Filter{{Family: "spin", Qualifier: "h", Limit: 1}}, nil,
			[]storage.Mutation{storage.SetCell("spin", "h", 1, []byte{1})})
		if err != nil || !taken {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func (s spinLock) release(ctx context.Context) error {
	return s.st.Mutate(ctx, s.row, storage.Mutation{Kind: storage.DeleteCells, Family: "spin", Qualifier: "h"})
}

// lockFigure: uncontended acquire+release latency and contended throughput
// (32 contenders) of lock.Locker against a plain CAS spin lock on the
// same embedded store, side by side.
func lockFigure(ctx context.Context, b *runner, r *Report) error {
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, "lock")})
	if err != nil {
		return err
	}
	defer db.Close()
	st := db.Store()
	lk, err := lock.New(st, lock.Options{MaxBackOff: time.Millisecond})
	if err != nil {
		return err
	}
	spin := spinLock{st: st, row: []byte("spin/x")}
	leaseOp := func(name string) func() error {
		return func() error {
			l, err := lk.Acquire(ctx, name, 10*time.Second)
			if err != nil {
				return err
			}
			return lk.Release(ctx, l)
		}
	}
	spinOp := func() error {
		if err := spin.acquire(ctx); err != nil {
			return err
		}
		return spin.release(ctx)
	}
	d := b.opts.Duration / 4
	end := b.timed(ctx, "lock: seconds measured", 4*d)
	lockLat, err1 := medianLatency(d, leaseOp("bench-uncontended"))
	spinLat, err2 := medianLatency(d, spinOp)
	lockN, err3 := throughput(d, 32, leaseOp("bench-contended"))
	spinN, err4 := throughput(d, 32, spinOp)
	err = errors.Join(err1, err2, err3, err4)
	if end(err); err != nil {
		return err
	}
	r.printf("lock:    uncontended acquire+release p50 %s (lease, token, ticket, store clock) vs %s (plain CAS spin lock): %.1fx the latency",
		lockLat.Round(time.Microsecond), spinLat.Round(time.Microsecond), float64(lockLat)/float64(spinLat))
	r.printf("lock:    32 contenders: %.0f vs %.0f acquisitions/s: ratio %.2fx (the spin lock has no fairness, no expiry and no token)",
		lockN, spinN, lockN/spinN)
	return nil
}

// medianLatency runs op one at a time for d and returns its median
// latency.
func medianLatency(d time.Duration, op func() error) (time.Duration, error) {
	var ds []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		s := time.Now()
		if err := op(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(s))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// throughput runs op from n goroutines for d and returns the ops per
// second; an op that fails stops its goroutine, and an error is returned.
func throughput(d time.Duration, n int, op func() error) (float64, error) {
	var done atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	end := time.Now().Add(d)
	for range n {
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := op(); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / d.Seconds(), first
}
