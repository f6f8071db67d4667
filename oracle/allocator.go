package oracle

import (
	"context"
	"fmt"
	"sync"
)

// Allocator hands out strictly increasing timestamps in [1, MaxTimestamp],
// persisting a high-water mark ahead of them so that a restart, kill -9
// included, resumes above every timestamp handed out before. It implements
// Backend.
//
// Concurrency: all methods are safe for concurrent use. mu guards the
// allocation state; at most one mark extension runs at a time, in its own
// goroutine, tracked by wg so Close can wait for it.
type Allocator struct {
	opts AllocatorOptions
	mark persister // nil for an in-memory allocator
	wg   sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		// Invariant: next >= 1 and next > every timestamp handed out by
		// this allocator or by any earlier one on the same path.
		next uint64
		// Invariant: every timestamp handed out is < limit, and limit is
		// durable in the mark file (in memory: limit = MaxTimestamp+1).
		// limit only grows.
		limit uint64
		// ext is the mark extension in flight, or nil.
		ext    *extension
		closed bool
	}
}

// persister keeps the durable high-water mark: a mark file, a lease row
// in the store (OpenStoreAllocator), or an external Mark
// (OpenMarkAllocator).
type persister interface {
	// write durably raises the mark; on a nil return it survives a crash.
	write(mark uint64) error
	// usable is nil while timestamps below the durable mark may be handed
	// out (a store lease that may have passed to another allocator is
	// not).
	usable() error
	close() error
}

// extension is one durable write of a higher mark.
type extension struct {
	target uint64        // the mark being written
	done   chan struct{} // closed when the write finished
	err    error         // the write's error; read only after done is closed
}

// OpenAllocator opens the allocator persisted at path, creating it if the
// file does not exist, or an in-memory allocator when path is "". The
// directory of path must exist. While it is open, no other Allocator may
// open the same path (ErrLocked). A mark file that exists but does not hold
// a valid mark is ErrCorruptMark.
//
// OpenAllocator durably writes a mark Window above the resume point before
// returning, so it costs one fsync. A mark file guards no data: the DB and
// the server keep their mark in their store (OpenStoreAllocator).
func OpenAllocator(path string, opts AllocatorOptions) (*Allocator, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	a := &Allocator{opts: opts}
	a.mu.next = max(1, opts.start)
	a.mu.limit = MaxTimestamp + 1
	if path == "" {
		return a, nil
	}
	if err := a.openMark(path); err != nil {
		return nil, err
	}
	return a, nil
}

// openMark locks path, resumes from its mark and persists the first window.
func (a *Allocator) openMark(path string) error {
	m, mark, err := openMarkFile(path)
	if err != nil {
		return err
	}
	a.mu.next = max(a.mu.next, mark)
	limit := satAdd(a.mu.next, a.opts.Window)
	if err := m.write(limit); err != nil {
		_ = m.close()
		return err
	}
	a.mark, a.mu.limit = m, limit
	return nil
}

// concurrent makes an Allocator a Concurrent backend: a Client calls it
// from every caller's goroutine, unbatched.
func (a *Allocator) concurrent() {}

// Allocate reserves n >= 1 consecutive fresh timestamps and returns the
// first; the caller owns first..first+n-1. Every timestamp it returns is
// greater than every timestamp any earlier Allocate returned, on this
// allocator or on an earlier one on the same path.
//
// It waits for the disk only when the persisted window is used up; ctx
// bounds that wait. Errors: ErrInvalidArgument, ErrExhausted, ErrClosed,
// a failed mark write, or ctx.Err().
func (a *Allocator) Allocate(ctx context.Context, n int) (uint64, error) {
	if n < 1 {
		return 0, fmt.Errorf("%w: allocate %d timestamps", ErrInvalidArgument, n)
	}
	for {
		a.mu.Lock()
		first, wait, err := a.allocateLocked(uint64(n))
		a.mu.Unlock()
		if wait == nil {
			return first, err
		}
		if err := await(ctx, wait); err != nil {
			return 0, err
		}
	}
}

// allocateLocked hands out n timestamps, or returns the extension to wait
// for when the persisted window is too small.
func (a *Allocator) allocateLocked(n uint64) (first uint64, wait *extension, err error) {
	if a.mark != nil {
		if err := a.mark.usable(); err != nil {
			return 0, nil, err
		}
	}
	switch {
	case a.mu.closed:
		return 0, nil, ErrClosed
	case n > MaxTimestamp+1-a.mu.next:
		return 0, nil, fmt.Errorf("%w: %d timestamps requested at %d", ErrExhausted, n, a.mu.next)
	case n > a.mu.limit-a.mu.next:
		// limit < MaxTimestamp+1 here, so an extension can raise it.
		return 0, a.extendLocked(n), nil
	}
	first = a.mu.next
	a.mu.next += n
	if a.mu.limit-a.mu.next < a.opts.Window/2 && a.mu.limit <= MaxTimestamp {
		a.extendLocked(0)
	}
	return first, nil, nil
}

// extendLocked starts a durable write of a mark Window above next+need,
// unless one is already in flight, and returns the extension in flight.
func (a *Allocator) extendLocked(need uint64) *extension {
	if a.mu.ext != nil {
		return a.mu.ext
	}
	ext := &extension{
		target: satAdd(satAdd(a.mu.next, need), a.opts.Window),
		done:   make(chan struct{}),
	}
	a.mu.ext = ext
	a.wg.Add(1)
	go a.runExtension(ext)
	return ext
}

// runExtension writes ext.target, then raises limit. The new limit is
// published only after the write is durable, so no timestamp is handed
// out above a mark that a crash could lose.
func (a *Allocator) runExtension(ext *extension) {
	defer a.wg.Done()
	err := a.writeMark(ext.target)
	a.mu.Lock()
	if err == nil {
		a.mu.limit = max(a.mu.limit, ext.target)
	}
	a.mu.ext = nil
	a.mu.Unlock()
	ext.err = err
	close(ext.done)
}

func (a *Allocator) writeMark(mark uint64) error {
	if hook := a.opts.beforeExtend; hook != nil {
		if err := hook(); err != nil {
			return err
		}
	}
	return a.mark.write(mark)
}

func await(ctx context.Context, ext *extension) error {
	select {
	case <-ext.done:
		return ext.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the allocator: later Allocate calls return ErrClosed. It
// waits for an extension in flight and releases its mark: a mark file's
// lock (writing nothing), a store's lease (one write that keeps the mark
// and names no holder, so the next allocator takes over at once), or an
// external Mark (its Close). Close is idempotent; every call returns the
// first call's result.
func (a *Allocator) Close() error {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.mu.closed = true
		a.mu.Unlock()
		a.wg.Wait()
		if a.mark != nil {
			a.closeErr = a.mark.close()
		}
	})
	return a.closeErr
}

// satAdd returns x+y capped at MaxTimestamp+1, the largest valid mark.
func satAdd(x, y uint64) uint64 {
	if y > MaxTimestamp+1-min(x, MaxTimestamp+1) {
		return MaxTimestamp + 1
	}
	return x + y
}
