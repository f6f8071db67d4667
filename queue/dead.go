package queue

import (
	"context"
	"encoding/json"
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

// Stats is a queue's contents as Stats counts them.
type Stats struct {
	Depth     int           // items waiting: pushed, nacked or requeued, or with their lease expired
	InFlight  int           // items under a live lease
	Dead      int           // dead letters
	Oldest    time.Duration // age of the oldest item waiting or in flight (by its push)
	Now       time.Time     // the store's clock when counted
	Retained  int           // acked items whose mark is still kept (Options.Retention)
	IndexKeys uint64        // stored keys of the queue's index a full scan visits (storage.Counted)
}

// Stats counts queue name's items (reading each item's state: an
// operator's call, not a worker's).
func (q *Queue) Stats(ctx context.Context, name string) (Stats, error) {
	if err := CheckName(name); err != nil {
		return Stats{}, err
	}
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Now: time.UnixMilli(lo)}
	p := prefix(name) + "i"
	oldest := ""
	err = q.store.Scan(ctx, []byte(p), []byte(p+"\xff"), stateFilter, 0, func(r storage.Row) bool {
		var s state
		if len(r.Cells) == 0 || json.Unmarshal(r.Cells[0].Value, &s) != nil {
			return true
		}
		id := strings.TrimPrefix(string(r.Key), p)
		switch {
		case s.St == stDead:
			st.Dead++
			return true
		case s.St == stAcked:
			st.Retained++
			return true
		case s.St == stVoid: // a push fenced off: no item
			return true
		case s.St == stLeased && s.At > lo:
			st.InFlight++
		default:
			st.Depth++
		}
		if oldest == "" || id < oldest {
			oldest = id
		}
		return true
	})
	if err != nil {
		return Stats{}, err
	}
	if oldest != "" {
		st.Oldest = st.Now.Sub(PushedAt(oldest))
	}
	if q.counted != nil {
		vp := prefix(name) + "v"
		st.IndexKeys, err = q.counted.ScanCounted(ctx, []byte(vp), []byte(vp+"\xff"), storage.Filter{{Family: Family, Qualifier: qualEntry, Limit: 1}}, 0, func(storage.Row) bool { return true })
	}
	return st, err
}
