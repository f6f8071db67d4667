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

// underLease moves d's item to next by transition, from the state under
// d's lease: first the epoch d knows, then, while the item is still
// leased under d's lease at another epoch (an Extend whose reply was lost
// moved it, or a fence rewrote it), from that one. A call conditioned on
// the lease's identity rather than on one epoch makes a lost reply
// harmless to the calls that follow. It returns whether next applied
// (then d.epoch is the epoch it applied from), and the item as read when
// not (no longer leased under d's lease).
func (q *Queue) underLease(ctx context.Context, d *Delivery, next *state, at stamp, extra ...storage.Mutation) (bool, item, error) {
	epoch, oldKey := d.epoch, entryKey(d.at, d.ID, d.req)
	for try := 0; ; try++ {
		ok, cur, err := q.transition(ctx, d.Queue, d.ID, epoch, next, at, oldKey, extra...)
		if err != nil || ok {
			if ok {
				d.epoch = epoch
			}
			return ok, item{}, err
		}
		if cur.st.St != stLeased || cur.st.Lease != d.lease || try == attempts {
			return false, cur, nil
		}
		epoch, oldKey = cur.epoch, cur.st.key(d.ID)
		next.Req = newReq()
	}
}

// Ack removes a delivered item from its queue, if the delivery's lease is
// still the item's (its lease may have expired, as long as the item was
// not delivered again since). Acking twice under one lease is not an
// error; under a lease the item no longer has, it is ErrNotHeld and
// changes nothing. The item keeps a mark, without its body, for
// Options.Retention, so that a re-sent Ack or PushAgain finds it.
func (q *Queue) Ack(ctx context.Context, d *Delivery) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	next := state{St: stAcked, Lease: d.lease, Req: newReq(), N: d.Deliveries}
	ok, cur, err := q.underLease(ctx, d, &next, func(lo, _ int64) int64 { return lo + q.opts.Retention.Milliseconds() },
		storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: qualBody})
	if err != nil || ok {
		return err
	}
	if cur.st.St == stAcked && cur.st.Lease == d.lease {
		return nil // acked already under this lease
	}
	return q.notHeld(d)
}

// Nack gives a delivered item back, to be delivered again after delay
// (by the store's clock), if the delivery's lease is still the item's;
// ErrNotHeld otherwise. The delivery counts towards MaxDeliveries.
// Nacking twice under one lease, while no one took the item since, is not
// an error and changes nothing (the first delay stands): a Nack sent
// again after an unknown outcome succeeds so, and also when another
// worker took the item meanwhile, as long as this lease is live (only
// this lease could have given it back).
func (q *Queue) Nack(ctx context.Context, d *Delivery, delay time.Duration) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	if delay < 0 {
		return fmt.Errorf("%w: negative delay %v", ErrInvalidArgument, delay)
	}
	next := state{St: stReady, Lease: d.lease, Req: newReq(), N: d.Deliveries}
	ok, cur, err := q.underLease(ctx, d, &next, func(lo, _ int64) int64 { return lo + ceilMS(float64(delay)) })
	if err != nil {
		return err
	}
	if !ok && !(cur.st.St == stReady && cur.st.Lease == d.lease) && !redelivered(d, cur) { // given back already under this lease
		return q.notHeld(d)
	}
	d.until = time.Time{}
	return nil
}

// redelivered reports that an item a Nack found under another lease was
// given back by this one: an earlier copy of the Nack applied (its reply
// lost) and the item was delivered again before the copy that asks now.
// While d's lease is live no one else can claim the item, so a later
// delivery of it can only follow this lease's own give-back; past the
// lease, it may follow an expiry, and the Nack is not held.
func redelivered(d *Delivery, cur item) bool {
	return d.Valid() && cur.st.Lease != d.lease && cur.st.N > d.Deliveries
}

// Extend renews the delivery's lease for ttl from now (the store's clock),
// if it is still the item's: a worker whose lease expired and whose item
// was delivered again gets ErrNotHeld and does not take it back. The
// worker may act until the call's first send + ttl × (1 − Drift). On an
// error other than ErrNotHeld its deadline stays, whether or not the
// extension applied; a later Ack, Nack or Extend finds the item under
// this lease either way.
func (q *Queue) Extend(ctx context.Context, d *Delivery, ttl time.Duration) error {
	if err := checkDelivery(d); err != nil {
		return err
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	sent := q.clock.local()
	next := state{St: stLeased, Lease: d.lease, Req: newReq(), N: d.Deliveries}
	ok, _, err := q.underLease(ctx, d, &next, func(_, hi int64) int64 { return hi + ceilMS(float64(ttl)) })
	if err != nil {
		return err
	}
	if !ok {
		return q.notHeld(d)
	}
	d.epoch, d.req, d.at = d.epoch+1, next.Req, next.At
	d.Expiry = time.UnixMilli(next.At)
	d.until = sent.Add(time.Duration(float64(ttl) * (1 - q.opts.Drift)))
	return nil
}
