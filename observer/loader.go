package observer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/txn"
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Concurrency bounds the loader transactions in flight. 0 means 8.
	Concurrency int
	// Progress, if set, is called after each committed item with the
	// number committed so far and the total (from one goroutine at a time).
	Progress func(done, total int)
}

// Update runs fn in a transaction, retrying conflicts until it commits or
// ctx ends (percolator.DB.Update).
type Update func(ctx context.Context, fn func(tx *txn.Txn) error) error

// Load runs fn for each item 0..n-1 in its own loader transaction, at most
// Concurrency at a time, each retried on conflict by update. It returns
// the first error (naming the item), after the items in flight finish.
func Load(ctx context.Context, update Update, n int, opts LoadOptions, fn func(tx *txn.Txn, item int) error) error {
	if n < 0 {
		return fmt.Errorf("%w: %d items", ErrInvalidArgument, n)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		progress   sync.Mutex
		errOnce    sync.Once
		firstErr   error
		wg         sync.WaitGroup
	)
	for range min(opts.Concurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := update(ctx, func(tx *txn.Txn) error { return fn(tx, i) }); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("observer: loading item %d: %w", i, err); cancel() })
					return
				}
				d := int(done.Add(1))
				if opts.Progress != nil {
					progress.Lock()
					opts.Progress(d, n)
					progress.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
