package queue

import (
	"context"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// claimTimeout bounds a claim that outlives its Pop's context.
const claimTimeout = 10 * time.Second

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
	return q.claim(cctx, name, e, it, ttl, l0)
}

// claim leases item it, whose current entry e is due, by a transition
// from the epoch read; one claim of an epoch applies, so a claim lost to
// another worker returns no delivery (and widens the spread of later
// looks; a claim won narrows it). The lease's deadline is measured from
// l0, before the clock reading its expiry was stamped from.
func (q *Queue) claim(ctx context.Context, name string, e entry, it item, ttl time.Duration, l0 time.Time) (*Delivery, bool, error) {
	lease := newReq()
	next := state{St: stLeased, Lease: lease, Req: lease, N: it.st.N + 1}
	ok, _, err := q.transition(ctx, name, e.id, it.epoch, &next, func(_, hi int64) int64 { return hi + ceilMS(float64(ttl)) }, e.key)
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
	d := &Delivery{Queue: name, ID: e.id, Body: it.body, Deliveries: next.N, PushedAt: PushedAt(e.id),
		Expiry: time.UnixMilli(next.At), lease: lease, epoch: it.epoch + 1, req: next.Req, at: next.At,
		until: l0.Add(time.Duration(float64(ttl) * (1 - q.opts.Drift))), local: q.clock.local}
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
