package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// stamp gives a state's entry time from bounds on the store's clock.
type stamp func(lo, hi int64) int64

// placeEntry writes the index entry of next (at epoch), its time stamped
// by at from a fresh reading of the store's clock, and makes sure it
// landed in time: within Grace of the reading, or before its own time
// plus Grace. The shared cursor stays twice Grace behind the store's
// time, so such an entry lands ahead of it. One that lands later may lie
// behind it, where no look would find it: it is deleted and written anew
// from a fresh reading (a later time for the state: a leased item's
// expiry only moves later, so its worker's deadline, measured from an
// earlier send, stays before it).
func (q *Queue) placeEntry(ctx context.Context, name, id string, next *state, epoch uint64, at stamp) error {
	for round := 0; ; round++ {
		if round == attempts {
			return fmt.Errorf("queue %s: item %s: the store's writes take longer than Grace (%v); raise Options.Grace", name, id, q.opts.Grace)
		}
		l0 := q.clock.local()
		lo, hi, err := q.clock.bounds(ctx)
		if err != nil {
			return err
		}
		next.At = at(lo, hi)
		// Lazy: the state's durable write, after it, covers it.
		if err := q.retry(ctx, func() error { return q.writeEntry(ctx, name, id, next, epoch, true) }); err != nil {
			return err
		}
		if q.clock.local().Sub(l0)+time.Duration(hi-lo)*time.Millisecond < time.Duration(next.At-lo)*time.Millisecond+q.opts.Grace {
			return nil
		}
		_ = q.deleteEntry(ctx, name, next.key(id))
	}
}

// writeEntry writes the index entry of an item's next state (its epoch
// as the value). It brings this process's cursor back to it if it lies
// behind: a process finds its own entries at once. A lazy write may
// return before it is durable, on a store whose writes share one ordered
// log (storage.Deferred): the caller's next durable write covers it.
// Idempotent: the key names one state (its request id) and the value is
// fixed, so a late copy at most brings back an entry already stale,
// which whoever finds it deletes.
func (q *Queue) writeEntry(ctx context.Context, name, id string, next *state, epoch uint64, lazy bool) error {
	key := next.key(id)
	if err := q.mutate(ctx, lazy, entryRow(name, key), storage.SetCell(Family, qualEntry, 0, epochValue(epoch))); err != nil {
		return err
	}
	q.mu.Lock()
	c := q.cursors[name]
	q.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		if key < c.local {
			c.local = key
		}
		c.mu.Unlock()
	}
	return nil
}

// deleteEntry deletes an entry that is stale or about to be: lazily, as
// one that outlives a crash is stale and deleted by whoever finds it.
// Its one cell, not the row: a row deletion costs a store that keeps
// indexes of its rows (a DB's transactions' cell index) a pass over them.
// Idempotent: the key names one state, never written again once that
// state is gone, so a late copy deletes nothing live.
func (q *Queue) deleteEntry(ctx context.Context, name, key string) error {
	return q.retry(ctx, func() error {
		return q.mutate(ctx, true, entryRow(name, key), storage.DeleteCell(Family, qualEntry, 0))
	})
}
