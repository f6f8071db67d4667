package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// Delivery is an item handed to a worker under a lease. The worker acts
// on it while Valid, then Acks it (or Nacks it, or Extends the lease).
type Delivery struct {
	Queue      string
	ID         string
	Body       []byte
	Deliveries int       // this one included
	PushedAt   time.Time // by the store's clock
	Expiry     time.Time // the lease's end, by the store's clock

	lease uint64 // the lease's id: kept in the item's state while it holds
	epoch uint64 // the item's state version under this lease
	req   uint64 // the request that wrote that state (names its entry)
	at    int64  // that state's entry time: the lease's expiry (ms)
	until time.Time
	local func() time.Time // the Queue's monotonic clock (nil: time.Now)
}

// Valid reports whether the worker may still act under the lease, by its
// own monotonic clock: until its Pop (or last Extend) send time + TTL ×
// (1 − Drift), before the store's clock ends the lease.
func (d *Delivery) Valid() bool {
	now := time.Now
	if d.local != nil {
		now = d.local
	}
	return now().Before(d.until)
}

// Deadline is when Valid turns false, by the worker's monotonic clock.
func (d *Delivery) Deadline() time.Time { return d.until }

// LeaseID identifies the delivery's lease (another delivery of the same
// item has another).
func (d *Delivery) LeaseID() uint64 { return d.lease }

// maxSpread bounds how many of the first entries workers choose among.
const maxSpread = 16

// maxBatch bounds how many index entries a look reads at a time.
const maxBatch = 256

// recent is how far behind the store's time a look's cursor stays when
// it resolved everything up to now.
const recent = 50 * time.Millisecond

// Pop waits for an item of queue name and returns it under a lease of
// ttl. Idle, it backs off with jitter up to Options.MaxBackOff between
// looks, and each look reads only the index entries that became due
// since the last one. A look that fails is made again, up to 8 failures
// in a row.
func (q *Queue) Pop(ctx context.Context, name string, ttl time.Duration) (*Delivery, error) {
	fails := 0
	for attempt := 0; ; attempt++ {
		d, err := q.TryPop(ctx, name, ttl)
		if err != nil && d == nil {
			if cerr := ctxErr(ctx); cerr != nil {
				return nil, cerr // however the store reported it
			}
			if fails++; fails < attempts && transient(ctx, err) && !errors.Is(err, ErrInvalidArgument) {
				err = nil // a look that failed: look again
			}
		} else {
			fails = 0
		}
		if d != nil || err != nil {
			return d, err
		}
		wait := min(q.opts.MaxBackOff, time.Millisecond<<min(attempt, 20))
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// ctxErr is ctx's error, or DeadlineExceeded once its deadline passed
// (an RPC may report it a moment before ctx does).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// TryPop returns the lowest available item of queue name under a lease
// of ttl, or nil when none is available now. Available: pushed (or nacked,
// or requeued) and not leased, or leased with the lease expired by the
// store's clock. An item already delivered MaxDeliveries times goes to
// the dead letters instead. A claim that took longer than ttl returns a
// delivery already over (Valid false), to be acked only if no one else
// got the item since.
func (q *Queue) TryPop(ctx context.Context, name string, ttl time.Duration) (*Delivery, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	q.poppers.Add(1)
	defer q.poppers.Add(-1)
	c := q.cursorOf(name)
	if err := q.turn(ctx, name, c); err != nil {
		return nil, err
	}
	// A look reads a few entries more than this process has workers
	// looking; when they were all resolved without a claim, twice as many.
	batch := min(4+2*int(q.poppers.Load()), maxBatch)
	for ; ; batch = min(2*batch, maxBatch) {
		d, more, err := q.look(ctx, name, c, ttl, batch)
		if d != nil || err != nil || !more {
			return d, err
		}
	}
}

// look reads up to batch due index entries from the cursor c and
// considers them, in the order spread gives, until one yields a
// delivery; it moves c past the entries it resolved. more reports that
// the batch was full and the cursor moved: due entries may lie beyond.
func (q *Queue) look(ctx context.Context, name string, c *cursor, ttl time.Duration, batch int) (d *Delivery, more bool, err error) {
	l0 := q.clock.local()
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return nil, false, err
	}
	start := c.get()
	end := fmt.Sprintf("%016x", uint64(lo+1))
	// A look resolves up to end, but its cursor stops recent before it:
	// entries of the last moment may still be landing (another process's
	// push, stamped a moment ago). Later ones are found by the catch-up.
	settled := fmt.Sprintf("%016x", uint64(max(0, lo+1-recent.Milliseconds())))
	if start >= end {
		q.metrics.empty.Add(1)
		return nil, false, nil
	}
	es, err := q.entries(ctx, name, start, end, batch)
	if err != nil {
		return nil, false, err
	}
	resolved := make([]bool, len(es))
	for _, i := range q.order(len(es)) {
		d, done, err := q.consider(ctx, name, es[i], ttl, lo, l0)
		if err != nil {
			return nil, false, err
		}
		resolved[i] = done
		if d != nil {
			c.set(max(start, q.after(es, resolved, settled, batch)))
			q.metrics.pops.Add(1)
			return d, false, nil
		}
	}
	next := q.after(es, resolved, settled, batch)
	c.set(max(start, next))
	if len(es) < batch || next == start {
		q.metrics.empty.Add(1)
		return nil, false, nil
	}
	return nil, true, nil
}

// order is the order a look considers n entries in. Workers start at
// different entries, so that they do not all claim the same one: as
// many as this process has looking, more after claims were lost to other
// processes. One worker alone takes them in order.
func (q *Queue) order(n int) []int {
	spread := min(max(int(q.poppers.Load()), int(q.spread.Load())), n, maxSpread)
	first := 0
	if spread > 1 {
		first = rand.IntN(spread)
	}
	out := make([]int, n)
	for j := range out {
		out[j] = (first + j) % n
	}
	return out
}

// entries reads up to limit index entries of queue name from start
// (an entry key) up to end.
func (q *Queue) entries(ctx context.Context, name, start, end string, limit int) ([]entry, error) {
	var es []entry
	err := q.scan(ctx, entryRow(name, start), entryRow(name, end), limit, func(r storage.Row) bool {
		if e, ok := parseEntry(name, r); ok {
			es = append(es, e)
		}
		return true
	})
	return es, err
}

// after returns where the next look starts: at the first entry of es not
// resolved, or past them all (at end when the scan of batch entries reached it).
func (q *Queue) after(es []entry, resolved []bool, end string, batch int) string {
	for i := range es {
		if !resolved[i] {
			return es[i].key
		}
	}
	if len(es) < batch {
		return end
	}
	return es[len(es)-1].key + "\x00"
}

func (q *Queue) scan(ctx context.Context, start, end []byte, limit int, fn func(storage.Row) bool) error {
	q.metrics.scans.Add(1)
	f := storage.Filter{{Family: Family, Qualifier: qualEntry, Limit: 1}}
	if q.counted != nil {
		v, err := q.counted.ScanCounted(ctx, start, end, f, limit, fn)
		q.metrics.visited.Add(v)
		return err
	}
	return q.store.Scan(ctx, start, end, f, limit, fn)
}
