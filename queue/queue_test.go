package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/manualclock"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

var ctx = context.Background()

func newQueue(t *testing.T, st storage.Store, opts Options) *Queue {
	t.Helper()
	q, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// clockedQueue is a Queue over a memory store whose clock, and the
// queue's own, is a manual one the test advances: when a lease or a
// nack's delay has run out does not depend on how fast the machine is.
func clockedQueue(t *testing.T, opts Options) (*Queue, *manualclock.Clock) {
	t.Helper()
	clock := manualclock.New(scenarioStart)
	st := &scenarioStore{Store: memory.New(), clock: clock}
	t.Cleanup(func() { st.Close() })
	q := newQueue(t, st, opts)
	q.clock.local = clock.Now
	return q, clock
}

func push(t *testing.T, q *Queue, name string, bodies ...string) []string {
	t.Helper()
	var ids []string
	for _, b := range bodies {
		id, err := q.Push(ctx, name, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func pop(t *testing.T, q *Queue, name string, ttl time.Duration) *Delivery {
	t.Helper()
	d, err := q.TryPop(ctx, name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func stats(t *testing.T, q *Queue, name string) Stats {
	t.Helper()
	s, err := q.Stats(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPushPopAck: one worker gets items in push order, acks them, and
// the queue is empty; stats count them on the way.
func TestPushPopAck(t *testing.T) {
	st := memory.New()
	defer st.Close()
	q := newQueue(t, st, Options{})
	push(t, q, "jobs", "a", "b", "c")
	if s := stats(t, q, "jobs"); s.Depth != 3 || s.InFlight != 0 || s.Dead != 0 {
		t.Fatalf("stats after 3 pushes: %+v", s)
	}
	var got []string
	var held []*Delivery
	for range 3 {
		d := pop(t, q, "jobs", time.Minute)
		if d == nil {
			t.Fatal("no item")
		}
		if d.Deliveries != 1 || !d.Valid() {
			t.Fatalf("delivery %+v", d)
		}
		got = append(got, string(d.Body))
		held = append(held, d)
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("order %v", got)
	}
	if d := pop(t, q, "jobs", time.Minute); d != nil {
		t.Fatalf("a fourth item: %s", d.Body)
	}
	if s := stats(t, q, "jobs"); s.Depth != 0 || s.InFlight != 3 {
		t.Fatalf("stats with 3 in flight: %+v", s)
	}
	for _, d := range held {
		if err := q.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(ctx, d); err != nil {
			t.Fatalf("second ack under the same lease: %v", err)
		}
	}
	if s := stats(t, q, "jobs"); s.Depth != 0 || s.InFlight != 0 || s.Retained != 3 {
		t.Fatalf("stats after acks: %+v", s)
	}
}

// TestLeaseExpiry: an item whose lease expires is delivered again, with
// its count up; the first worker can neither ack nor extend it then.
func TestLeaseExpiry(t *testing.T) {
	q, clock := clockedQueue(t, Options{})
	push(t, q, "jobs", "x")
	d1 := pop(t, q, "jobs", 50*time.Millisecond)
	if pop(t, q, "jobs", time.Minute) != nil {
		t.Fatal("delivered twice under a live lease")
	}
	clock.Advance(70 * time.Millisecond)
	if d1.Valid() {
		t.Fatal("lease valid past its TTL")
	}
	d2 := pop(t, q, "jobs", time.Minute)
	if d2 == nil || d2.ID != d1.ID || d2.Deliveries != 2 {
		t.Fatalf("redelivery: %+v", d2)
	}
	if err := q.Extend(ctx, d1, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale extend: %v", err)
	}
	if err := q.Ack(ctx, d1); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale ack: %v", err)
	}
	if err := q.Nack(ctx, d1, 0); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale nack: %v", err)
	}
	if err := q.Extend(ctx, d2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, d2); err != nil {
		t.Fatal(err)
	}
}

// TestExtendKeepsItem: a lease extended before it expires keeps the item
// from other workers past the first TTL.
func TestExtendKeepsItem(t *testing.T) {
	q, clock := clockedQueue(t, Options{})
	push(t, q, "jobs", "x")
	d := pop(t, q, "jobs", 80*time.Millisecond)
	for range 4 {
		clock.Advance(40 * time.Millisecond)
		if err := q.Extend(ctx, d, 80*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if o := pop(t, q, "jobs", time.Minute); o != nil {
			t.Fatal("an extended lease's item was delivered again")
		}
	}
	if err := q.Ack(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// TestNackAndDeadLetter: a nacked item comes back after its delay; after
// MaxDeliveries deliveries it moves to the dead letters, which list it and
// requeue it with its count reset.
func TestNackAndDeadLetter(t *testing.T) {
	q, clock := clockedQueue(t, Options{MaxDeliveries: 3})
	ids := push(t, q, "jobs", "poison", "fine")
	for n := 1; n <= 3; n++ {
		d := pop(t, q, "jobs", time.Minute)
		if d == nil || d.ID != ids[0] || d.Deliveries != n {
			t.Fatalf("delivery %d: %+v", n, d)
		}
		if err := q.Nack(ctx, d, 30*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if n == 1 { // the other item comes first while this one waits
			f := pop(t, q, "jobs", time.Minute)
			if f == nil || f.ID != ids[1] {
				t.Fatalf("during the nack's delay: %+v", f)
			}
			if err := q.Ack(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if d := pop(t, q, "jobs", time.Minute); d != nil {
			t.Fatalf("nacked item delivered before its delay: %+v", d)
		}
		clock.Advance(40 * time.Millisecond)
	}
	if d := pop(t, q, "jobs", time.Minute); d != nil {
		t.Fatalf("delivered past MaxDeliveries: %+v", d)
	}
	dead, err := q.Dead(ctx, "jobs", 0)
	if err != nil || len(dead) != 1 || dead[0].ID != ids[0] || string(dead[0].Body) != "poison" || dead[0].Deliveries != 3 {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
	if s := stats(t, q, "jobs"); s.Dead != 1 || s.Depth != 0 {
		t.Fatalf("stats: %+v", s)
	}
	if err := q.Requeue(ctx, "jobs", ids[1]); !errors.Is(err, ErrNotDead) {
		t.Fatalf("requeue of an acked item: %v", err)
	}
	if err := q.Requeue(ctx, "jobs", ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := q.Requeue(ctx, "jobs", ids[0]); !errors.Is(err, ErrNotDead) {
		t.Fatalf("second requeue: %v", err)
	}
	d := pop(t, q, "jobs", time.Minute)
	if d == nil || d.ID != ids[0] || d.Deliveries != 1 {
		t.Fatalf("requeued delivery: %+v", d)
	}
	if dead, _ := q.Dead(ctx, "jobs", 0); len(dead) != 0 {
		t.Fatalf("dead letters after requeue: %+v", dead)
	}
}

// TestNamedQueues: queues whose names are prefixes of each other are
// apart.
func TestNamedQueues(t *testing.T) {
	st := memory.New()
	defer st.Close()
	q := newQueue(t, st, Options{})
	for _, n := range []string{"a", "a/b", "ab", "a\xff"} {
		push(t, q, n, n)
	}
	for _, n := range []string{"a", "a/b", "ab", "a\xff"} {
		d := pop(t, q, n, time.Minute)
		if d == nil || string(d.Body) != n {
			t.Fatalf("queue %q: %+v", n, d)
		}
		if d := pop(t, q, n, time.Minute); d != nil {
			t.Fatalf("queue %q: a second item %q", n, d.Body)
		}
	}
}

// TestBadInput: clear errors, and nothing changed.
func TestBadInput(t *testing.T) {
	st := memory.New()
	defer st.Close()
	q := newQueue(t, st, Options{})
	push(t, q, "jobs", "x")
	push(t, q, "gone", "y")
	other := pop(t, q, "gone", time.Minute)
	if err := q.Nack(ctx, other, time.Hour); err != nil { // no longer held
		t.Fatal(err)
	}
	d := pop(t, q, "jobs", time.Minute)
	for i, err := range []error{
		func() error { _, err := q.Push(ctx, "", nil); return err }(),
		func() error { _, err := q.Push(ctx, "a\x00b", nil); return err }(),
		func() error { _, err := q.Push(ctx, string(make([]byte, MaxNameSize+1)), nil); return err }(),
		func() error { _, err := q.Push(ctx, "jobs", make([]byte, MaxBodySize+1)); return err }(),
		func() error { _, err := q.TryPop(ctx, "", time.Minute); return err }(),
		func() error { _, err := q.TryPop(ctx, "jobs", 0); return err }(),
		func() error { _, err := q.Pop(ctx, "jobs", -time.Second); return err }(),
		q.Ack(ctx, nil),
		q.Ack(ctx, &Delivery{}),
		q.Extend(ctx, d, 0),
		q.Nack(ctx, d, -time.Second),
		q.Requeue(ctx, "jobs", "nope"),
		func() error { _, err := q.Dead(ctx, "", 0); return err }(),
		func() error { _, err := q.Stats(ctx, ""); return err }(),
		func() error { _, err := New(st, Options{MaxDeliveries: -1}); return err }(),
		func() error { _, err := New(st, Options{Grace: -1}); return err }(),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("case %d: %v, want ErrInvalidArgument", i, err)
		}
	}
	for _, err := range []error{q.Ack(ctx, other), q.Extend(ctx, other, time.Minute)} {
		if !errors.Is(err, ErrNotHeld) {
			t.Errorf("a call under a lease given back: %v, want ErrNotHeld", err)
		}
	}
	if err := q.Nack(ctx, other, 0); err != nil { // as a Nack sent again after an unknown outcome
		t.Errorf("a second nack under the lease that gave the item back: %v", err)
	}
	if d := pop(t, q, "gone", time.Minute); d != nil {
		t.Errorf("a second nack changed the first's delay: %+v delivered", d)
	}
	if _, err := New(noClock{st}, Options{}); !errors.Is(err, ErrNoClock) {
		t.Errorf("a store without a clock: %v", err)
	}
	if s := stats(t, q, "jobs"); s.InFlight != 1 || s.Depth != 0 {
		t.Fatalf("bad input changed the queue: %+v", s)
	}
	if err := q.Ack(ctx, d); err != nil {
		t.Fatal(err)
	}
}

type noClock struct{ storage.Store }

// TestHistory: items through workers that die, give items back and
// overrun their leases (runHistory's checks).
func TestHistory(t *testing.T) {
	st := memory.New()
	defer st.Close()
	runHistory(t, st, history{items: 4000, pushers: 2, workers: 8, ttl: 60 * time.Millisecond,
		kill: 0.02, nack: 0.02, overrun: 0.01, poison: 200, maxDeliveries: 3})
}

// TestManyItems: 10,000 items through 8 workers that die at random (each
// death a new process: a new Queue and cursor), nack and overrun, with
// poison items dead-lettered after 5 deliveries.
func TestManyItems(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 items")
	}
	manyItems(t, 10000)
}

// TestFaultSuiteHundredThousand is TestManyItems with 100,000 items, in
// the fault suite (PERCOLATOR_FAULT_SUITE=1).
func TestFaultSuiteHundredThousand(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("the fault suite's soak: set PERCOLATOR_FAULT_SUITE=1")
	}
	manyItems(t, 100000)
}

func manyItems(t *testing.T, items int) {
	st := memory.New()
	defer st.Close()
	runHistory(t, st, history{items: items, pushers: 4, workers: 8, ttl: 150 * time.Millisecond,
		kill: 0.001, nack: 0.001, overrun: 0.0002, poison: items / 20, maxDeliveries: 5})
}

// TestPopCostFlat: what a Pop reads does not grow with the items under
// lease (they are not in a look's range): keys visited per Pop with 200
// and with 20,000 items in flight. (bench --only queue measures it on
// Pebble, whose scans also visit deletion markers.)
func TestPopCostFlat(t *testing.T) {
	perPop := func(inFlight int) float64 {
		st := memory.New()
		defer st.Close()
		q := newQueue(t, st, Options{})
		for range inFlight {
			push(t, q, "q", "held")
		}
		for range inFlight {
			if pop(t, q, "q", time.Hour) == nil {
				t.Fatal("no item")
			}
		}
		const n = 300
		for range n {
			push(t, q, "q", "x")
		}
		before := q.Metrics()
		for range n {
			d := pop(t, q, "q", time.Minute)
			if d == nil || string(d.Body) != "x" {
				t.Fatalf("pop: %+v", d)
			}
			if err := q.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		m := q.Metrics()
		return float64(m.KeysVisited-before.KeysVisited) / float64(m.Pops-before.Pops)
	}
	small, large := perPop(200), perPop(20000)
	t.Logf("keys visited per pop: %.1f with 200 in flight, %.1f with 20,000", small, large)
	if large > 2*small+4 {
		t.Fatalf("a Pop's cost grows with the items in flight: %.1f keys with 200, %.1f with 20,000", small, large)
	}
}

// TestNackReplyLostThenRedelivered: a Nack whose first copy applied (its
// reply lost) and whose item another worker then took is sent again: the
// copy that asks now finds the item under the other lease, and reports the
// give-back done while its own lease is live, since only it could have
// given the item back; once its lease ran out, it is ErrNotHeld.
func TestNackReplyLostThenRedelivered(t *testing.T) {
	st := memory.New()
	defer st.Close()
	q := newQueue(t, st, Options{})
	push(t, q, "jobs", "a")
	d := pop(t, q, "jobs", time.Minute)
	again := *d // the call as sent again: the state before the first copy
	if err := q.Nack(ctx, d, 0); err != nil {
		t.Fatal(err)
	}
	other := pop(t, q, "jobs", time.Minute)
	if other == nil || other.Deliveries != 2 {
		t.Fatalf("the item was not delivered again: %+v", other)
	}
	if err := q.Nack(ctx, &again, 0); err != nil {
		t.Fatalf("the Nack sent again under a live lease: %v, want nil (its first copy gave the item back)", err)
	}
	expired := again
	expired.until = time.Now().Add(-time.Second)
	if err := q.Nack(ctx, &expired, 0); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("the Nack sent again past its lease: %v, want ErrNotHeld", err)
	}
	if err := q.Ack(ctx, other); err != nil {
		t.Fatalf("the other worker's Ack: %v", err)
	}
}
