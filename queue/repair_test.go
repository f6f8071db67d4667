package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// hookStore passes one process's writes through onWrite, which may hold
// them (a slow network), fail them, or apply them and lose the reply;
// once crashed, every call fails (the process is dead). It forwards the
// clock.
type hookStore struct {
	storage.Store
	mu        sync.Mutex
	onWrite   func(row []byte, apply func() error) error
	readFails atomic.Int64 // so many more reads of item rows fail
	crashed   atomic.Bool
}

var errCrashed = errors.New("test: the process crashed")

func (h *hookStore) hook(f func(row []byte, apply func() error) error) {
	h.mu.Lock()
	h.onWrite = f
	h.mu.Unlock()
}

func (h *hookStore) write(row []byte, apply func() error) error {
	if h.crashed.Load() {
		return errCrashed
	}
	h.mu.Lock()
	f := h.onWrite
	h.mu.Unlock()
	if f == nil {
		return apply()
	}
	return f(row, apply)
}

func (h *hookStore) Now(ctx context.Context) (time.Time, error) {
	if h.crashed.Load() {
		return time.Time{}, errCrashed
	}
	return h.Store.(storage.Clock).Now(ctx)
}

func (h *hookStore) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	if h.crashed.Load() {
		return storage.Row{}, errCrashed
	}
	if isItemRow(row) && h.readFails.Add(-1) >= 0 {
		return storage.Row{}, errors.New("test: read failed")
	}
	return h.Store.ReadRow(ctx, row, f)
}

func (h *hookStore) Scan(ctx context.Context, start, end []byte, f storage.Filter, limit int, fn func(storage.Row) bool) error {
	if h.crashed.Load() {
		return errCrashed
	}
	return h.Store.Scan(ctx, start, end, f, limit, fn)
}

func (h *hookStore) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	return h.write(row, func() error { return h.Store.Mutate(ctx, row, ms...) })
}

func (h *hookStore) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	var m bool
	err := h.write(row, func() (err error) {
		m, err = h.Store.CheckAndMutate(ctx, row, p, a, b)
		return err
	})
	return m, err
}

func isItemRow(row []byte) bool { return bytes.Contains(row, []byte("\x00i")) }

// drain pops and acks every item of queue name until Stats says the
// queue is empty (nothing waiting, nothing in flight), and returns the
// bodies delivered. A queue that never empties is a hang, bounded
// generously.
func drain(t *testing.T, q *Queue, name string, ttl time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(hangGuard)
	for {
		s := stats(t, q, name)
		if s.Depth == 0 && s.InFlight == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue never empties: stats %+v after %v; delivered %q", s, hangGuard, got)
		}
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		d, err := q.Pop(pctx, name, ttl)
		cancel()
		if err != nil {
			continue
		}
		got = append(got, string(d.Body))
		if err := q.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
}

// hangGuard bounds a wait that only a hang can make long.
const hangGuard = 30 * time.Second

// fastOpts make the repairs of a test come soon.
var fastOpts = Options{Grace: 100 * time.Millisecond, CatchUp: 50 * time.Millisecond, MaxBackOff: 2 * time.Millisecond}

// TestPushCrash: a pusher that dies after each of its writes in turn:
// the queue still empties (Stats does not count an item no Pop can
// deliver), and the item is delivered at most once.
func TestPushCrash(t *testing.T) {
	for writes := 1; writes <= 3; writes++ {
		t.Run(fmt.Sprintf("after %d writes", writes), func(t *testing.T) {
			st := memory.New()
			defer st.Close()
			h := &hookStore{Store: st}
			left := writes
			h.hook(func(row []byte, apply func() error) error {
				if left--; left < 0 {
					h.crashed.Store(true)
					return errCrashed
				}
				return apply()
			})
			_, _ = newQueue(t, h, fastOpts).Push(ctx, "q", []byte("x"))
			if got := drain(t, newQueue(t, st, fastOpts), "q", time.Minute); len(got) > 1 {
				t.Fatalf("delivered %q", got)
			}
		})
	}
}

// TestLateChangeThenCrash: a worker's Nack whose state change stays in
// the network longer than twice Grace, after which the worker dies: its
// entry, unseen for that long, may be given up by the others, but the
// item is still delivered (the change lands with its entry, or not at
// all).
func TestLateChangeThenCrash(t *testing.T) {
	st := memory.New()
	defer st.Close()
	h := &hookStore{Store: st}
	worker := newQueue(t, h, fastOpts)
	push(t, worker, "q", "x")
	d, err := worker.Pop(ctx, "q", time.Second) // outlives the late change
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	h.hook(func(row []byte, apply func() error) error {
		late := false
		if isItemRow(row) {
			once.Do(func() { late = true })
		}
		if !late {
			return apply()
		}
		time.Sleep(4 * fastOpts.Grace) // in the network
		err := apply()
		h.crashed.Store(true) // the worker dies as the change lands
		if err != nil {
			return err
		}
		return errCrashed
	})
	consumer := newQueue(t, st, fastOpts)
	nacked := make(chan struct{})
	go func() {
		defer close(nacked)
		_ = worker.Nack(ctx, d, 0)
	}()
	if got := drain(t, consumer, "q", time.Minute); len(got) != 1 {
		t.Fatalf("delivered %q, want the item once", got)
	}
	<-nacked
}

// TestAckAfterLostExtend: an Extend that applied but whose caller saw an
// error (its reply lost, its context ended) does not make the next Ack
// fail.
func TestAckAfterLostExtend(t *testing.T) {
	st := memory.New()
	defer st.Close()
	h := &hookStore{Store: st}
	q := newQueue(t, h, Options{})
	push(t, q, "q", "x")
	d := pop(t, q, "q", time.Minute)
	ectx, cancel := context.WithCancel(ctx)
	var once sync.Once
	h.hook(func(row []byte, apply func() error) error {
		lose := false
		if isItemRow(row) {
			once.Do(func() { lose = true })
		}
		err := apply()
		if lose && err == nil {
			cancel() // the caller gives up as the reply is lost
			return errors.New("test: reply lost")
		}
		return err
	})
	if err := q.Extend(ectx, d, 2*time.Minute); err == nil {
		t.Fatal("an extend whose reply was lost reported success")
	}
	h.hook(nil)
	if err := q.Ack(ctx, d); err != nil {
		t.Fatalf("ack after an extend that applied unseen: %v", err)
	}
	if s := stats(t, q, "q"); s.Depth != 0 || s.InFlight != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestPushRetry: a Push whose item write keeps losing its reply, and
// whose reads of the item fail, cannot learn its outcome: it returns the
// item's ID and ErrUnknown. The caller sends it again with PushAgain
// once the store answers, as the API says: the item is queued once.
func TestPushRetry(t *testing.T) {
	st := memory.New()
	defer st.Close()
	h := &hookStore{Store: st}
	q := newQueue(t, h, Options{})
	h.hook(func(row []byte, apply func() error) error {
		if err := apply(); err != nil || !isItemRow(row) {
			return err
		}
		return errors.New("test: reply lost")
	})
	h.readFails.Store(1 << 30)
	id, err := q.Push(ctx, "q", []byte("x"))
	if !errors.Is(err, ErrUnknown) || id == "" {
		t.Fatalf("a push that could not learn its outcome: id %q, %v; want an ID and ErrUnknown", id, err)
	}
	h.hook(nil)
	h.readFails.Store(0)
	again, err := q.PushAgain(ctx, "q", id, []byte("x"))
	if err != nil || again != id {
		t.Fatalf("pushed again: %q, %v; want %q", again, err, id)
	}
	if s := stats(t, q, "q"); s.Depth != 1 {
		t.Fatalf("one item pushed, with a retry: stats %+v", s)
	}
	d := pop(t, q, "q", time.Minute)
	if d == nil || d.ID != id || string(d.Body) != "x" {
		t.Fatalf("delivered %+v", d)
	}
	if err := q.Ack(ctx, d); err != nil {
		t.Fatal(err)
	}
	if again, err := q.PushAgain(ctx, "q", id, []byte("x")); err != nil || again != id {
		t.Fatalf("pushed again after its ack: %q, %v", again, err)
	}
	if s := stats(t, q, "q"); s.Depth != 0 || s.Retained != 1 {
		t.Fatalf("an acked item pushed again: stats %+v", s)
	}
}

// TestResendAfterLostReply: a Nack's state write applies and loses its
// reply, the read that would tell fails, and the write is sent again:
// the re-send's predicate no longer matches (the first copy moved the
// state on). The Nack must see its own write in the state, succeed, and
// keep the item's entry, so that the item is delivered again.
func TestResendAfterLostReply(t *testing.T) {
	st := memory.New()
	defer st.Close()
	h := &hookStore{Store: st}
	q := newQueue(t, h, Options{})
	push(t, q, "q", "x")
	d := pop(t, q, "q", time.Minute)
	var once sync.Once
	h.hook(func(row []byte, apply func() error) error {
		lose := false
		if isItemRow(row) {
			once.Do(func() { lose = true })
		}
		err := apply()
		if lose && err == nil {
			h.readFails.Store(1)
			return errors.New("test: reply lost")
		}
		return err
	})
	if err := q.Nack(ctx, d, 0); err != nil {
		t.Fatalf("nack: %v", err)
	}
	h.hook(nil)
	if got := drain(t, newQueue(t, st, Options{}), "q", time.Minute); len(got) != 1 {
		t.Fatalf("delivered %q after the nack, want the item once", got)
	}
}

// TestLateMarkDeletion: a Requeue's deletion of the dead-letter mark
// lands late, after the item was dead-lettered again: the new
// dead-lettering's mark stays, and Dead lists the item.
func TestLateMarkDeletion(t *testing.T) {
	st := memory.New()
	defer st.Close()
	opts := Options{MaxDeliveries: 1}
	q := newQueue(t, st, opts)
	h := &hookStore{Store: st}
	rq := newQueue(t, h, opts)
	ids := push(t, q, "q", "x")
	kill := func() { // delivered once, given back: dead at the next look
		pctx, cancel := context.WithTimeout(ctx, hangGuard)
		defer cancel()
		d, err := q.Pop(pctx, "q", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Nack(ctx, d, 0); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(hangGuard); stats(t, q, "q").Dead == 0; { // dead-lettered by a look
			if d := pop(t, q, "q", time.Minute); d != nil {
				t.Fatalf("delivered past MaxDeliveries: %+v", d)
			}
			if time.Now().After(deadline) {
				t.Fatal("never dead-lettered")
			}
		}
	}
	kill()
	held, release := make(chan struct{}), make(chan struct{})
	h.hook(func(row []byte, apply func() error) error {
		if bytes.Contains(row, []byte("\x00d")) {
			close(held)
			<-release // in the network
		}
		return apply()
	})
	requeued := make(chan error, 1)
	go func() { requeued <- rq.Requeue(ctx, "q", ids[0]) }()
	select {
	case <-held:
	case err := <-requeued:
		t.Fatalf("requeue returned before deleting the mark: %v", err)
	}
	kill()
	close(release)
	if err := <-requeued; err != nil {
		t.Fatal(err)
	}
	dead, err := q.Dead(ctx, "q", 0)
	if err != nil || len(dead) != 1 || dead[0].ID != ids[0] {
		t.Fatalf("dead letters after a late mark deletion: %+v, %v", dead, err)
	}
}
