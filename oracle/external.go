package oracle

import "fmt"

// Mark is a durable high-water mark kept outside this package, in a
// coordination service (oracle/etcd keeps it in etcd, fenced by the
// leader's election), for an Allocator opened with OpenMarkAllocator. The
// Allocator hands out only timestamps below a mark Write has made durable
// (invariant 3), and only while Usable is nil.
//
// Concurrency: the Allocator calls Write from one goroutine at a time (at
// most one extension runs), Usable concurrently with Write and with
// itself, and Close once, after the last Write returned.
type Mark interface {
	// Write durably raises the mark to at least mark: on a nil return a
	// crash of this process, or its replacement by another allocator,
	// cannot lose it. It bounds its own wait (the Allocator gives it no
	// context). An error fails the extension: the callers waiting for it
	// get the error, and the next extension tries again.
	Write(mark uint64) error
	// Usable is nil while timestamps below the durable mark may be handed
	// out: an elected allocator whose term may have ended (its lease not
	// provably live) is not. It is called under the Allocator's mutex on
	// every allocation, so it must be fast and must not block or call
	// back into the Allocator. Its error is returned by Allocate as is.
	Usable() error
	// Close releases the mark; the Allocator writes nothing after it.
	Close() error
}

// markPersister adapts a Mark to the Allocator's persister.
type markPersister struct{ m Mark }

func (p markPersister) write(mark uint64) error { return p.m.Write(mark) }
func (p markPersister) usable() error           { return p.m.Usable() }
func (p markPersister) close() error            { return p.m.Close() }

// OpenMarkAllocator returns an Allocator over an external mark m, resuming
// at resume: the mark m held when the caller read it, above every
// timestamp handed out before. It first writes a mark Window above the
// resume point (max(1, resume)) through m, so it costs one Write. On
// success the Allocator owns m and closes it in Close; on error m is the
// caller's to close.
//
// Errors: ErrInvalidArgument (bad options, or resume above
// MaxTimestamp+1, the largest mark), or the first Write's error.
func OpenMarkAllocator(resume uint64, m Mark, opts AllocatorOptions) (*Allocator, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if resume > MaxTimestamp+1 {
		return nil, fmt.Errorf("%w: resume point %d above MaxTimestamp+1", ErrInvalidArgument, resume)
	}
	a := &Allocator{opts: opts}
	a.mu.next = max(1, opts.start, resume)
	limit := satAdd(a.mu.next, opts.Window)
	if err := m.Write(limit); err != nil {
		return nil, err
	}
	a.mark, a.mu.limit = markPersister{m}, limit
	return a, nil
}
