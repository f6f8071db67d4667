package queue

import (
	"context"
)

// class is what an index entry is to its item.
type class int

const (
	current class = iota // the entry of the item's state
	stale                // the entry of a state the item has left, or of an item gone
	pending              // the entry of a state change not applied (yet)
)

// classify says what entry e is to item it as read.
func classify(e entry, it item) class {
	switch {
	case it.epoch == 0 && e.epoch == 1:
		return pending // a push on its way (entries go first)
	case it.epoch == 0:
		return stale // its item is gone
	case e.epoch < it.epoch || (e.epoch == it.epoch && e.req != it.st.Req):
		return stale // the item moved on
	case e.epoch == it.epoch:
		return current
	case e.epoch == it.epoch+1:
		return pending
	}
	return stale // two changes ahead: left by an item removed and pushed again
}

// resolve reads the item of entry e and classifies e. A pending entry
// older than twice Grace (lo: the low bound of the store's time now)
// names a change that its writer gave up, or that is still on its way
// after far longer than Grace: it is fenced off (fence), and e
// classified again, stale now unless the change applied first.
func (q *Queue) resolve(ctx context.Context, name string, e entry, lo int64, withBody bool) (item, class, error) {
	it, err := q.readItem(ctx, name, e.id, withBody)
	if err != nil {
		return item{}, pending, err
	}
	c := classify(e, it)
	if c != pending || e.at >= lo-2*q.opts.Grace.Milliseconds() {
		return it, c, nil
	}
	if err := q.fence(ctx, name, e, it); err != nil {
		return item{}, pending, err
	}
	if it, err = q.readItem(ctx, name, e.id, withBody); err != nil {
		return item{}, pending, err
	}
	return it, classify(e, it), nil
}

// fence makes sure the change that pending entry e was written for can
// never apply, so that deleting e cannot leave an item without its
// entry: the change is conditioned on the item's state at its epoch (or
// on its absence, for a push), and the fence changes that first. A
// push's gets a void state in its place (removed after Retention, its
// own entry first); any other's, the item's state as it is, at the next
// epoch, under a new request with a fresh entry (a leased item keeps its
// lease and expiry, so that its worker can still ack or extend it). If
// the change applied first, the fence changes nothing.
func (q *Queue) fence(ctx context.Context, name string, e entry, it item) error {
	if it.epoch == 0 {
		void := state{St: stVoid, Req: newReq()}
		if err := q.placeEntry(ctx, name, e.id, &void, 1, func(lo, _ int64) int64 { return lo + q.opts.Retention.Milliseconds() }); err != nil {
			return err
		}
		got, err := q.create(ctx, name, e.id, void, nil)
		if err == nil && (got.epoch != 1 || got.st.Req != void.Req) {
			err = q.deleteEntry(ctx, name, void.key(e.id)) // the push came first
		}
		return err
	}
	next := it.st
	next.Req = newReq()
	var at stamp
	oldKey := ""
	if it.st.St != stDead { // a dead letter has no entry
		at = func(lo, _ int64) int64 { return max(it.st.At, lo) }
		oldKey = it.st.key(e.id)
	}
	_, _, err := q.transition(ctx, name, e.id, it.epoch, &next, at, oldKey)
	return err
}
