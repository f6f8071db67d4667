package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

func checkDelivery(d *Delivery) error {
	if d == nil || d.lease == 0 {
		return fmt.Errorf("%w: no delivery", ErrInvalidArgument)
	}
	return nil
}

func (q *Queue) notHeld(d *Delivery) error {
	return fmt.Errorf("%w: %s item %s (lease %x)", ErrNotHeld, d.Queue, d.ID, d.lease)
}

// Ack removes a delivered item from its queue, if the delivery's lease is
// still the item's (its lease may have expired, as long as the item was
// not delivered again since). Acking twice under one lease is not an
// error; under a lease the item no longer has, it is ErrNotHeld and
// changes nothing. The item keeps a mark, without its body, for
// Options.Retention, so that a re-sent Ack or Push finds it.
func (q *Queue) Ack(ctx context.Context, d *Delivery) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	next := state{St: stAcked, Lease: d.lease, At: d.at + q.opts.Retention.Milliseconds(), Req: newReq(), N: d.Deliveries}
	ok, err := q.transition(ctx, d.Queue, d.ID, d.epoch, next, entryKey(d.at, d.ID, d.req),
		storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: qualBody})
	if err != nil || ok {
		return err
	}
	it, err := q.readItem(ctx, d.Queue, d.ID, false)
	if err != nil {
		return err
	}
	if it.st.St == stAcked && it.st.Lease == d.lease {
		return nil // acked already under this lease
	}
	return q.notHeld(d)
}

// Nack gives a delivered item back, to be delivered again after delay
// (by the store's clock), if the delivery's lease is still the item's;
// ErrNotHeld otherwise. The delivery counts towards MaxDeliveries.
func (q *Queue) Nack(ctx context.Context, d *Delivery, delay time.Duration) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	if delay < 0 {
		return fmt.Errorf("%w: negative delay %v", ErrInvalidArgument, delay)
	}
	l0 := time.Now()
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return err
	}
	next := state{St: stReady, Lease: d.lease, At: lo + ceilMS(float64(delay)), Req: newReq(), N: d.Deliveries}
	ok, err := q.transition(ctx, d.Queue, d.ID, d.epoch, next, entryKey(d.at, d.ID, d.req))
	if err != nil {
		return err
	}
	if !ok {
		return q.notHeld(d)
	}
	d.until = time.Time{}
	return q.settle(ctx, d.Queue, d.ID, d.epoch+1, next, lo, l0)
}

// Extend renews the delivery's lease for ttl from now (the store's clock),
// if it is still the item's: a worker whose lease expired and whose item
// was delivered again gets ErrNotHeld and does not take it back. The
// worker may act until the call's send time + ttl × (1 − Drift).
func (q *Queue) Extend(ctx context.Context, d *Delivery, ttl time.Duration) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	l0 := time.Now()
	_, hi, err := q.clock.bounds(ctx)
	if err != nil {
		return err
	}
	next := state{St: stLeased, Lease: d.lease, At: hi + ceilMS(float64(ttl)), Req: newReq(), N: d.Deliveries}
	ok, err := q.transition(ctx, d.Queue, d.ID, d.epoch, next, entryKey(d.at, d.ID, d.req))
	if err != nil {
		return err
	}
	if !ok {
		return q.notHeld(d)
	}
	d.epoch, d.req, d.at = d.epoch+1, next.Req, next.At
	d.Expiry = time.UnixMilli(next.At)
	d.until = l0.Add(time.Duration(float64(ttl) * (1 - q.opts.Drift)))
	return nil
}
