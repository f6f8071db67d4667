package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
	"github.com/seed-992972ee/percolator/queue"
)

// workQueue is a work queue (package queue): pushes of unique values, and
// takes that pop an item under a short lease, act up to 20ms while it is
// valid, then ack it (or, one in ten, nack it for redelivery); the final
// read drains what is left and lists the dead letters. Checked: every
// acknowledged push is acked, drained or a dead letter; nothing is
// delivered that was not pushed; no two deliveries of an item hold valid
// leases at once; no item is delivered past MaxDeliveries.
type workQueue struct {
	name string
	values
	mu     sync.Mutex
	queues map[*percolator.DB]*queue.Queue
}

const (
	queueTTL           = 500 * time.Millisecond
	queueMaxDeliveries = 5
	// queueIdle is how long the final drain waits for one more item:
	// past Grace + CatchUp (queue.Options' defaults, 3s), within which an
	// entry written late is delivered, and past a dead client's lease.
	queueIdle = 4 * time.Second
)

func (w *workQueue) Name() string { return "queue" }

func (w *workQueue) Setup(context.Context, *percolator.DB) error { return nil }

func (w *workQueue) Next(rng *rand.Rand) (string, []history.Mop) {
	if rng.IntN(2) == 0 {
		return "push", []history.Mop{{F: history.Push, Key: "q", Arg: w.value()}}
	}
	return "take", []history.Mop{{F: history.Take, Key: "q"}}
}

// queue is db's Queue, made once per DB.
func (w *workQueue) queue(db *percolator.DB) (*queue.Queue, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[db]; q != nil {
		return q, nil
	}
	q, err := queue.New(db.Store(), queue.Options{MaxDeliveries: queueMaxDeliveries})
	if err != nil {
		return nil, err
	}
	if w.queues == nil {
		w.queues = map[*percolator.DB]*queue.Queue{}
	}
	w.queues[db] = q
	return q, nil
}

func (w *workQueue) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	q, err := w.queue(db)
	if err != nil {
		return mops, errors.Join(errBeforeCommit, err)
	}
	switch f {
	case "push":
		_, err := q.PushUntilKnown(ctx, w.name, []byte(strconv.FormatInt(mops[0].Arg, 10)), 3)
		return mops, err
	case "take":
		return mops, w.take(ctx, q, &mops[0])
	}
	return mops, w.final(ctx, q, mops)
}

// take pops one item and acts on it; no item within a second is a failed
// take.
func (w *workQueue) take(ctx context.Context, q *queue.Queue, m *history.Mop) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	d, err := q.Pop(pctx, w.name, queueTTL)
	cancel()
	if err != nil {
		return errors.Join(errBeforeCommit, err)
	}
	granted := history.Now()
	m.Lease = &history.Lease{Granted: granted, Deadline: granted + int64(time.Until(d.Deadline()))}
	m.Read = []int64{int64(d.Deliveries)}
	if m.Arg, err = strconv.ParseInt(string(d.Body), 10, 64); err != nil {
		return err
	}
	time.Sleep(min(time.Duration(rand.Int64N(int64(20*time.Millisecond))), max(time.Until(d.Deadline()), 0)))
	m.Lease.Released = history.Now()
	if rand.IntN(10) == 0 {
		return q.Nack(ctx, d, 0)
	}
	if err := q.Ack(ctx, d); err != nil {
		return err
	}
	m.Expect = 1
	return nil
}

// final drains the queue, acking every item, until none comes for
// queueIdle, then lists the dead letters.
func (w *workQueue) final(ctx context.Context, q *queue.Queue, mops []history.Mop) error {
	mops[0].Read = []int64{} // every item acked, as it goes: a drain cut short still says what it took
	for {
		pctx, cancel := context.WithTimeout(ctx, queueIdle)
		d, err := q.Pop(pctx, w.name, queueTTL)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return err
		}
		v, err := strconv.ParseInt(string(d.Body), 10, 64)
		if err != nil {
			return err
		}
		if err := q.Ack(ctx, d); err != nil {
			return err
		}
		mops[0].Read = append(mops[0].Read, v)
	}
	dead, err := q.Dead(ctx, w.name, 0)
	if err != nil {
		return err
	}
	mops[1].Read = []int64{}
	for _, l := range dead {
		v, err := strconv.ParseInt(string(l.Body), 10, 64)
		if err != nil {
			return err
		}
		mops[1].Read = append(mops[1].Read, v)
	}
	return nil
}

func (w *workQueue) Final() (string, []history.Mop) {
	return "final", []history.Mop{{F: history.Drain, Key: "q"}, {F: history.Dead, Key: "q"}}
}

func (w *workQueue) Check(h []history.Op) history.Result {
	return history.CheckQueue(h, history.QueueOptions{MaxDeliveries: queueMaxDeliveries})
}
