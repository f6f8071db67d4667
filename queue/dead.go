package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// DeadLetter is an item that was delivered MaxDeliveries times without
// an Ack.
type DeadLetter struct {
	ID         string
	Body       []byte
	Deliveries int
	PushedAt   time.Time
}

// Dead lists up to limit (0: all) dead letters of queue name, oldest push
// first.
func (q *Queue) Dead(ctx context.Context, name string, limit int) ([]DeadLetter, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit", ErrInvalidArgument)
	}
	p := prefix(name) + "d"
	var ids []string
	err := q.store.Scan(ctx, []byte(p), []byte(p+"\xff"), storage.Filter{{Family: Family, Qualifier: qualDead, Limit: 1}}, 0, func(r storage.Row) bool {
		ids = append(ids, strings.TrimPrefix(string(r.Key), p))
		return true
	})
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for _, id := range ids {
		if limit > 0 && len(out) == limit {
			break
		}
		it, err := q.readItem(ctx, name, id, true)
		if err != nil {
			return nil, err
		}
		if it.st.St != stDead {
			continue // being moved there, or requeued
		}
		out = append(out, DeadLetter{ID: id, Body: it.body, Deliveries: it.st.N, PushedAt: PushedAt(id)})
	}
	return out, nil
}

// Requeue moves dead letter id of queue name back to the queue, with its
// delivery count reset; ErrNotDead if it is not a dead letter.
func (q *Queue) Requeue(ctx context.Context, name, id string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	var it item
	if err := q.retry(ctx, func() (err error) { it, err = q.readItem(ctx, name, id, false); return err }); err != nil {
		return err
	}
	for try := 0; ; try++ {
		if it.st.St != stDead {
			return fmt.Errorf("%w: %s item %s", ErrNotDead, name, id)
		}
		next := state{St: stReady, Req: newReq()}
		ok, cur, err := q.transition(ctx, name, id, it.epoch, &next, func(lo, _ int64) int64 { return lo }, "")
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if try == attempts {
			return fmt.Errorf("%w: %s item %s (changed by others meanwhile)", ErrNotDead, name, id)
		}
		it = cur // moved on: requeued by another, or still dead (a fence rewrote it)
	}
	// The marks of this dead-lettering and earlier ones: a later one's,
	// at its own epoch, stays, however late this deletion lands. Lazy: a
	// mark left by a crash is skipped (its item is not dead).
	return q.retry(ctx, func() error {
		return q.mutate(ctx, true, deadRow(name, id), storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: qualDead, Time: storage.Before(it.epoch + 1)})
	})
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
