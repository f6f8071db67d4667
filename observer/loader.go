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
	// Progress, if set, is called after each finished item (committed, or
	// skipped by OnError) with the number finished so far and the total
	// (from one goroutine at a time).
	Progress func(done, total int)
	// OnError, if set, decides what an item that failed does to the rest
	// of the load: it is called (from one goroutine at a time) with the
	// item and its error, which wraps the item's own (a failure of the
	// transaction, not ctx ending); returning nil skips the item and goes
	// on with the others, returning an error stops the load with that
	// error. Unset, the first failed item stops the load (a batch job that
	// reports a bad item and goes on sets it).
	OnError func(item int, err error) error
}

// Update runs fn in a transaction, retrying conflicts until it commits or
// ctx ends (percolator.DB.Update).
type Update func(ctx context.Context, fn func(tx *txn.Txn) error) error

// Load runs fn for each item 0..n-1 in its own loader transaction, at most
// Concurrency at a time, each retried on conflict by update. It returns
// the first error that stops it (naming the item), after the items in
// flight finish; an item OnError skips does not stop it.
func Load(ctx context.Context, update Update, n int, opts LoadOptions, fn func(tx *txn.Txn, item int) error) error {
	if n < 0 {
		return fmt.Errorf("%w: %d items", ErrInvalidArgument, n)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := &loader{n: n, opts: opts, cancel: cancel}
	var wg sync.WaitGroup
	for range min(opts.Concurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.work(ctx, update, fn)
		}()
	}
	wg.Wait()
	if l.err != nil {
		return l.err
	}
	return ctx.Err()
}

// loader is the state one Load shares between its goroutines.
type loader struct {
	n      int
	opts   LoadOptions
	cancel context.CancelFunc
	next   atomic.Int64

	// mu serializes the callbacks and guards done and err.
	mu   sync.Mutex
	done int   // items finished
	err  error // the error that stopped the load
}

// work takes items until none is left, ctx ends or the load stops.
func (l *loader) work(ctx context.Context, update Update, fn func(tx *txn.Txn, item int) error) {
	for {
		i := int(l.next.Add(1) - 1)
		if i >= l.n || ctx.Err() != nil {
			return
		}
		err := update(ctx, func(tx *txn.Txn) error { return fn(tx, i) })
		if err != nil && (ctx.Err() != nil || !l.skip(i, err)) {
			return
		}
		l.finished()
	}
}

// skip reports whether the failed item i may be skipped; if not, it
// records the error that stops the load and cancels the others.
func (l *loader) skip(i int, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	err = fmt.Errorf("observer: loading item %d: %w", i, err)
	if l.opts.OnError != nil {
		if err = l.opts.OnError(i, err); err == nil {
			return true
		}
	}
	if l.err == nil {
		l.err = err
		l.cancel()
	}
	return false
}

func (l *loader) finished() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
	if l.opts.Progress != nil {
		l.opts.Progress(l.done, l.n)
	}
}
