package oracle

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/seed-992972ee/percolator/internal/mutant"
)

// Backend allocates timestamps; the Client's one dependency. Allocator
// implements it, and so will the RPC client of a remote oracle.
type Backend interface {
	// Allocate reserves n >= 1 consecutive timestamps and returns the
	// first; the caller owns first..first+n-1. Every range must lie above
	// every range returned before, across backend restarts and failovers.
	//
	// The Client calls it from one goroutine at a time, with a context that
	// is never cancelled: no single caller's cancellation may fail a
	// request that serves others. An implementation that can hang (an RPC)
	// must bound the call itself, with a deadline of its own.
	Allocate(ctx context.Context, n int) (first uint64, err error)
}

// VersionedBackend is a Backend that may also return, with each range, a
// version it read after allocating it (a server's observer registry
// version): every caller of the batch then has a value read after it
// asked.
type VersionedBackend interface {
	Backend
	// AllocateVersioned is Allocate, with the version read after
	// allocating; ok is false when this reply carries none (an oracle
	// that reads no store), which may differ from one reply to the next
	// (a remote oracle's leader changed), so a caller decides per reply.
	AllocateVersioned(ctx context.Context, n int) (first, version uint64, ok bool, err error)
}

// Concurrent is a Backend in this process that any number of callers may
// call at once, each with its own context, and that answers without a
// round trip: an Allocator (a mutex, and a wait only for a used-up
// window, which honours the caller's context). A Client calls it from
// each caller's goroutine, one timestamp per call, unbatched (doc.go,
// "Batching").
type Concurrent interface {
	Backend
	concurrent()
}

// Client batches concurrent Timestamp calls into single Backend requests,
// as the paper's oracle clients do, under invariant 1 of DESIGN.md: a
// request serves only the callers that were already waiting when it was
// sent. A caller that arrives while a request is in flight waits for the
// next one, so every timestamp it gets was allocated after it asked.
//
// Concurrency: Timestamp is safe for concurrent use. mu guards the batch
// being filled and the in-flight flag. Requests are sent by a pump
// goroutine, at most one at a time; it exits when no caller is waiting, so
// an idle Client owns no goroutine and needs no Close.
type Client struct {
	backend Backend
	// direct is backend when it is Concurrent: every call goes straight
	// to it, on the caller's goroutine.
	direct Concurrent

	// last is the highest timestamp the backend has returned. Owned by the
	// running pump; ownership passes between pumps through mu.
	last uint64

	// onJoin, if set, runs under mu when a caller has joined a batch, before
	// that batch can be sent. Test knob.
	onJoin func()

	// repeat is the repeat-timestamp mutant's state (mutants.go).
	repeat repeater

	mu struct {
		sync.Mutex
		// waiting collects the callers that arrived since the last request
		// was sent; nil if none. Invariant: waiting has not been sent.
		waiting *batch
		// Invariant: inflight is true iff a pump goroutine is running.
		inflight bool
	}
}

// batch is one Backend request and the callers it serves. Callers share
// one done channel instead of one channel each.
type batch struct {
	// n is the number of callers; caller i gets first+i. Written under
	// Client.mu while the batch is waiting, fixed once it is sent.
	n     int
	done  chan struct{} // closed once first, version and err are set
	first uint64
	// version is the VersionedBackend's version; versioned says there is
	// one.
	version   uint64
	versioned bool
	err       error
}

// NewClient returns a Client that allocates from b.
func NewClient(b Backend) *Client {
	if mutant.On(mutant.StaleRange) {
		b = &aheadBackend{backend: b} // breaks DESIGN.md invariant 1's batching rule (mutants.go)
	}
	c := &Client{backend: b}
	c.direct, _ = b.(Concurrent)
	return c
}

// Timestamp returns a fresh timestamp, greater than every timestamp this
// Client returned before the call started, and allocated by a Backend
// request sent after the call started. If ctx is done first it returns
// ctx.Err(); the other callers of its batch are unaffected. Otherwise the
// error is the Backend's (shared by the whole batch) or ErrBadReply.
func (c *Client) Timestamp(ctx context.Context) (uint64, error) {
	ts, _, _, err := c.TimestampVersion(ctx)
	return ts, err
}

// TimestampVersion is Timestamp, with the version a VersionedBackend read
// after allocating it (ok false: the backend has none).
func (c *Client) TimestampVersion(ctx context.Context) (ts, version uint64, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, false, err
	}
	if c.direct != nil {
		return c.timestampDirect(ctx)
	}
	b, i := c.join()
	if done := ctx.Done(); done != nil {
		select {
		case <-b.done:
		case <-done:
			return 0, 0, false, ctx.Err()
		}
	} else {
		// A plain receive is cheaper than a select.
		<-b.done
	}
	if b.err != nil {
		return 0, 0, false, b.err
	}
	ts = b.first + uint64(i)
	if mutant.On(mutant.RepeatTimestamp) {
		ts = c.repeat.next(ts) // breaks DESIGN.md invariant 1 (mutants.go)
	}
	return ts, b.version, b.versioned, nil
}

// timestampDirect is TimestampVersion from a Concurrent backend: one
// request, sent after the call started, serving this caller alone.
func (c *Client) timestampDirect(ctx context.Context) (ts, version uint64, ok bool, err error) {
	ts, err = c.direct.Allocate(ctx, 1)
	switch {
	case err != nil:
		return 0, 0, false, err
	case ts == 0 || ts > MaxTimestamp:
		return 0, 0, false, fmt.Errorf("%w: %d", ErrBadReply, ts)
	}
	if mutant.On(mutant.RepeatTimestamp) {
		ts = c.repeat.next(ts) // breaks DESIGN.md invariant 1 (mutants.go)
	}
	return ts, 0, false, nil
}

// join adds the caller to the waiting batch and, if no request is in
// flight, sends that batch at once: the caller arrived before it is sent.
func (c *Client) join() (*batch, int) {
	c.mu.Lock()
	b := c.mu.waiting
	if b == nil {
		b = &batch{done: make(chan struct{})}
		c.mu.waiting = b
	}
	i := b.n
	b.n++
	if c.onJoin != nil {
		c.onJoin()
	}
	start := !c.mu.inflight
	if start {
		c.mu.inflight = true
		c.mu.waiting = nil
	}
	c.mu.Unlock()
	if start {
		go c.pump(b)
	}
	return b, i
}

// pump serves b, then each batch that filled up meanwhile, until none is
// waiting.
//
// After publishing a result the pump yields once before taking the next
// batch: the callers it just woke are runnable on its own P, and letting
// them run first lets them join the next batch instead of each getting a
// request of its own. Without the yield a fast backend saw about 1.4
// callers per request and 64 callers got under 3,500,000 timestamps/s;
// with it, about 25 per request and over 6,000,000/s on 2 cores.
func (c *Client) pump(b *batch) {
	for b != nil {
		c.serve(b)
		runtime.Gosched()
		b = c.takeWaiting()
	}
}

// takeWaiting removes the waiting batch for sending, or, if none, ends the
// pump's turn. Removing it under mu closes it to later arrivals.
func (c *Client) takeWaiting() *batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.mu.waiting
	c.mu.waiting = nil
	if b == nil {
		c.mu.inflight = false
	}
	return b
}

// serve sends one request for b's callers and publishes its result.
func (c *Client) serve(b *batch) {
	var first uint64
	var err error
	if vb, ok := c.backend.(VersionedBackend); ok {
		first, b.version, b.versioned, err = vb.AllocateVersioned(context.Background(), b.n)
	} else {
		first, err = c.backend.Allocate(context.Background(), b.n)
	}
	if err == nil {
		err = c.check(first, b.n)
	}
	b.first, b.err = first, err
	close(b.done)
}

// check rejects a reply that would reuse a timestamp or leave the range
// [1, MaxTimestamp], and records the reply's last timestamp.
func (c *Client) check(first uint64, n int) error {
	if first <= c.last || first == 0 || first > MaxTimestamp || uint64(n)-1 > MaxTimestamp-first {
		return fmt.Errorf("%w: [%d, +%d) after %d", ErrBadReply, first, n, c.last)
	}
	c.last = first + uint64(n) - 1
	return nil
}
