package queue

import (
	"context"
	"errors"
	"time"
)

// ConsumeOptions configures Consume.
type ConsumeOptions struct {
	// TTL is the lease on each item (Pop's ttl).
	TTL time.Duration
	// Count stops Consume after this many items; 0: no limit.
	Count int
	// Idle stops Consume after this long with nothing to pop; 0: never.
	Idle time.Duration
}

// Consume pops items of queue name under leases of opts.TTL and hands
// each to fn, then acks it, until opts.Count items were handed over,
// opts.Idle passed with none to pop, or ctx ended; each of those stops
// it with nil. An error of fn, or of a Pop or an Ack, stops it with that
// error.
//
// fn runs before the ack (at least once: a consumer killed between the
// two leaves the item to be delivered again once its lease expires).
// An item whose lease ended before fn returned is not acked, since it
// will come again; an Ack that finds the item taken under another lease
// (ErrNotHeld) is not an error, for the same reason. The ack is sent
// even when ctx ended during fn, so a handed-over item is not delivered
// twice for a stop.
func (q *Queue) Consume(ctx context.Context, name string, opts ConsumeOptions, fn func(*Delivery) error) error {
	for n := 0; opts.Count == 0 || n < opts.Count; n++ {
		d, err := q.popWithin(ctx, name, opts.TTL, opts.Idle)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				return nil // idle for opts.Idle
			}
			if ctx.Err() != nil {
				return nil // stopped
			}
			return err
		}
		if err := fn(d); err != nil {
			return err
		}
		if !d.Valid() {
			continue // handed over after its lease ended: it will come again
		}
		if err := q.Ack(context.WithoutCancel(ctx), d); err != nil && !errors.Is(err, ErrNotHeld) {
			return err
		}
	}
	return nil
}

// popWithin pops an item, waiting at most idle for one (0: until ctx
// ends).
func (q *Queue) popWithin(ctx context.Context, name string, ttl, idle time.Duration) (*Delivery, error) {
	if idle > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, idle)
		defer cancel()
	}
	return q.Pop(ctx, name, ttl)
}

// PushUntilKnown pushes body like Push and, while the outcome stays
// unknown (ErrUnknown), sends it again under its ID with PushAgain (which
// never pushes it twice, where a second Push would), up to tries more
// times while ctx lasts. It returns what the last send returned.
func (q *Queue) PushUntilKnown(ctx context.Context, name string, body []byte, tries int) (string, error) {
	id, err := q.Push(ctx, name, body)
	for i := 0; errors.Is(err, ErrUnknown) && i < tries && ctx.Err() == nil; i++ {
		id, err = q.PushAgain(ctx, name, id, body)
	}
	return id, err
}
