package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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
}

// Valid reports whether the worker may still act under the lease, by its
// own monotonic clock: until its Pop (or last Extend) send time + TTL ×
// (1 − Drift), before the store's clock ends the lease.
func (d *Delivery) Valid() bool { return time.Now().Before(d.until) }

// LeaseID identifies the delivery's lease (another delivery of the same
// item has another).
func (d *Delivery) LeaseID() uint64 { return d.lease }

// cursor is this process's position in a queue's index: entries below it
// were resolved when this process last looked, or are found by the
// shared cursor's catch-up.
type cursor struct {
	mu       sync.Mutex
	local    string // entry key to scan from
	loaded   bool
	nextTurn time.Time
}

func (q *Queue) cursorOf(name string) *cursor {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.cursors[name]
	if c == nil {
		c = &cursor{}
		q.cursors[name] = c
	}
	return c
}

func (c *cursor) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.local
}

func (c *cursor) set(k string) {
	c.mu.Lock()
	c.local = k
	c.mu.Unlock()
}

// claimTimeout bounds a claim that outlives its Pop's context.
const claimTimeout = 10 * time.Second

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
		l0 := time.Now()
		lo, _, err := q.clock.bounds(ctx)
		if err != nil {
			return nil, err
		}
		start := c.get()
		end := fmt.Sprintf("%016x", uint64(lo+1))
		// A look resolves up to end, but its cursor stops recent before
		// it: entries of the last moment may still be landing (another
		// process's push, stamped a moment ago). Later ones are found
		// by the catch-up.
		settled := fmt.Sprintf("%016x", uint64(max(0, lo+1-recent.Milliseconds())))
		if start >= end {
			q.metrics.empty.Add(1)
			return nil, nil
		}
		var es []entry
		err = q.scan(ctx, entryRow(name, start), entryRow(name, end), batch, func(r storage.Row) bool {
			if e, ok := parseEntry(name, r); ok {
				es = append(es, e)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		// Workers start at different entries, so that they do not all
		// claim the same one: as many as this process has looking, more
		// after claims were lost to other processes. One worker alone
		// takes them in order.
		spread := min(max(int(q.poppers.Load()), int(q.spread.Load())), len(es), maxSpread)
		first := 0
		if spread > 1 {
			first = rand.IntN(spread)
		}
		resolved := make([]bool, len(es))
		for j := range es {
			i := (first + j) % len(es)
			d, done, err := q.consider(ctx, name, es[i], ttl, lo, l0)
			if err != nil {
				return nil, err
			}
			resolved[i] = done
			if d != nil {
				c.set(max(start, q.after(es, resolved, settled, batch)))
				q.metrics.pops.Add(1)
				return d, nil
			}
		}
		next := q.after(es, resolved, settled, batch)
		c.set(max(start, next))
		if len(es) < batch || next == start {
			q.metrics.empty.Add(1)
			return nil, nil
		}
	}
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

// consider acts on one due index entry: it claims the item it names if
// the entry is the item's current one and the item is available, moves
// it to the dead letters, removes an acked (or void) item whose
// retention ended, or deletes the entry when it is stale. done reports
// the entry resolved (a pending one, written for a state change not yet
// applied, is not, until it is fenced off).
func (q *Queue) consider(ctx context.Context, name string, e entry, ttl time.Duration, lo int64, l0 time.Time) (d *Delivery, done bool, err error) {
	it, class, err := q.resolve(ctx, name, e, lo, true)
	switch {
	case err != nil:
		return nil, false, err
	case class == stale:
		return nil, true, q.deleteEntry(ctx, name, e.key)
	case class == pending:
		return nil, false, nil
	}
	switch it.st.St {
	case stAcked, stVoid: // its retention is over: the item goes
		return nil, true, q.remove(ctx, name, e, it)
	case stReady, stLeased: // due: available (a lease's entry is due when it expired)
	default:
		return nil, true, q.deleteEntry(ctx, name, e.key)
	}
	// A claim once sent is seen through even if ctx ends, so that a
	// cancelled Pop does not leave an item leased to no one.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	if it.st.N >= q.opts.MaxDeliveries {
		return nil, true, q.deadLetter(cctx, name, e, it)
	}
	lease := newReq()
	next := state{St: stLeased, Lease: lease, Req: lease, N: it.st.N + 1}
	ok, _, err := q.transition(cctx, name, e.id, it.epoch, &next, func(_, hi int64) int64 { return hi + ceilMS(float64(ttl)) }, e.key)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		q.metrics.conflicts.Add(1)
		if sp := q.spread.Load(); sp < maxSpread {
			q.spread.CompareAndSwap(sp, 2*sp)
		}
		return nil, true, nil
	}
	if sp := q.spread.Load(); sp > 1 {
		q.spread.CompareAndSwap(sp, sp-1)
	}
	// The lease's deadline is measured from l0, before the clock
	// reading its expiry was stamped from.
	d = &Delivery{Queue: name, ID: e.id, Body: it.body, Deliveries: next.N, PushedAt: PushedAt(e.id),
		Expiry: time.UnixMilli(next.At), lease: lease, epoch: it.epoch + 1, req: next.Req, at: next.At,
		until: l0.Add(time.Duration(float64(ttl) * (1 - q.opts.Drift)))}
	return d, true, nil
}

// remove deletes an acked or void item whose entry e (current) is due,
// then the entry. Conditioned on the item's epoch, the deletion applies
// at most once, and a late copy changes nothing once the row is gone or
// changed.
func (q *Queue) remove(ctx context.Context, name string, e entry, it item) error {
	err := q.retry(ctx, func() error {
		_, err := q.store.CheckAndMutate(ctx, itemRow(name, e.id),
			storage.Filter{{Family: Family, Qualifier: qualState, Time: storage.At(it.epoch), Limit: 1}},
			[]storage.Mutation{
				{Kind: storage.DeleteCells, Family: Family, Qualifier: qualState},
				{Kind: storage.DeleteCells, Family: Family, Qualifier: qualBody},
			}, nil)
		return err
	})
	if err != nil {
		return err
	}
	return q.deleteEntry(ctx, name, e.key)
}

// deadLetter moves an item delivered MaxDeliveries times to the dead
// letters: the mark first (a listing skips a mark whose item is not
// dead), then the state. The mark is written at the dead state's epoch,
// so that a Requeue's deletion of an earlier mark, however late it
// lands, cannot delete it.
func (q *Queue) deadLetter(ctx context.Context, name string, e entry, it item) error {
	// Lazy: the state's durable write covers it. Idempotent: a late copy
	// landing after a Requeue deleted the mark brings it back, and a
	// listing skips it while its item is not dead.
	if err := q.retry(ctx, func() error {
		return q.mutate(ctx, true, deadRow(name, e.id), storage.SetCell(Family, qualDead, it.epoch+1, nil))
	}); err != nil {
		return err
	}
	ok, _, err := q.transition(ctx, name, e.id, it.epoch, &state{St: stDead, Lease: it.st.Lease, Req: newReq(), N: it.st.N}, nil, e.key)
	if ok {
		q.metrics.deadLettered.Add(1)
	}
	return err
}

// sharedCursor is the cursor row's value: every index entry below Key
// was resolved, as judged at store time At.
type sharedCursor struct {
	Key string `json:"key"`
	At  int64  `json:"at"`
}

// catchUpBatch bounds the entries one catch-up reads.
const catchUpBatch = 1024

// turn keeps the shared cursor: a process reads it when it starts and
// every CatchUp/2, and when no process has advanced it for CatchUp, this
// one does (by CheckAndMutate on its version, so one at a time): it reads
// the entries from it up to twice Grace before the store's time, deletes
// the stale ones and fences off the pending ones (so that they become
// stale), and stops at the first item's current entry, which this
// process then looks at next. An entry written late, behind the
// processes' own cursors, is found so within Grace + CatchUp. The
// cursor's advance is conditioned on its version, so a late copy of it
// changes nothing once another advanced it.
func (q *Queue) turn(ctx context.Context, name string, c *cursor) error {
	c.mu.Lock()
	due := !c.loaded || !time.Now().Before(c.nextTurn)
	c.mu.Unlock()
	if !due {
		return nil
	}
	r, err := q.store.ReadRow(ctx, cursorRow(name), storage.Filter{{Family: Family, Qualifier: qualCursor, Limit: 1}})
	if err != nil {
		return err
	}
	var p sharedCursor
	var version uint64
	if len(r.Cells) > 0 {
		if json.Unmarshal(r.Cells[0].Value, &p) != nil {
			return fmt.Errorf("queue %s: corrupt cursor", name)
		}
		version = r.Cells[0].TS
	}
	c.mu.Lock()
	if !c.loaded || p.Key > c.local {
		c.local, c.loaded = p.Key, true
	}
	c.nextTurn = time.Now().Add(q.opts.CatchUp/2 + rand.N(q.opts.CatchUp/4+1))
	c.mu.Unlock()
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return err
	}
	if p.At+q.opts.CatchUp.Milliseconds() > lo {
		return nil
	}
	end := fmt.Sprintf("%016x", uint64(max(0, lo-2*q.opts.Grace.Milliseconds())))
	if p.Key >= end {
		return nil
	}
	var es []entry
	err = q.scan(ctx, entryRow(name, p.Key), entryRow(name, end), catchUpBatch, func(r storage.Row) bool {
		if e, ok := parseEntry(name, r); ok {
			es = append(es, e)
		}
		return true
	})
	if err != nil {
		return err
	}
	next := end
	if len(es) == catchUpBatch {
		next = es[len(es)-1].key + "\x00"
	}
	for _, e := range es {
		_, class, err := q.resolve(ctx, name, e, lo, false)
		if err != nil {
			return err
		}
		if class == stale {
			if err := q.deleteEntry(ctx, name, e.key); err != nil {
				return err
			}
			continue
		}
		next = e.key // the item's current entry, or one that could not be fenced off yet: the cursor stops here
		break
	}
	b, _ := json.Marshal(sharedCursor{Key: next, At: lo})
	lost, err := q.store.CheckAndMutate(ctx, cursorRow(name),
		storage.Filter{{Family: Family, Qualifier: qualCursor, Time: storage.From(version + 1), Limit: 1}}, nil,
		[]storage.Mutation{
			storage.SetCell(Family, qualCursor, version+1, b),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualCursor, Time: storage.Before(version + 1)},
		})
	if err != nil || lost {
		return nil // another process advanced it first (or the next turn will)
	}
	c.mu.Lock()
	if next < c.local {
		c.local = next // an entry this process's cursor passed while it was written
	}
	c.mu.Unlock()
	return nil
}
