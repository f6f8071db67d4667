package queue

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestConsume: Consume hands the items over in push order and acks
// each; it stops after Count items, or once Idle passed with none, and
// an error of its callback stops it with the item left unacked (it
// comes again once its lease expires).
func TestConsume(t *testing.T) {
	st := memory.New()
	defer st.Close()
	q := newQueue(t, st, Options{})
	push(t, q, "q", "a", "b", "c", "d")
	var got []string
	collect := func(d *Delivery) error { got = append(got, string(d.Body)); return nil }
	if err := q.Consume(ctx, "q", ConsumeOptions{TTL: time.Minute, Count: 2}, collect); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, q, "q"); len(got) != 2 || got[0] != "a" || got[1] != "b" || s.Depth != 2 || s.InFlight != 0 {
		t.Fatalf("after Count 2: handed %q, stats %+v", got, s)
	}
	boom := errors.New("test: callback failed")
	err := q.Consume(ctx, "q", ConsumeOptions{TTL: time.Minute}, func(*Delivery) error { return boom })
	if s := stats(t, q, "q"); !errors.Is(err, boom) || s.InFlight != 1 {
		t.Fatalf("a failing callback: %v, stats %+v; want its error and the item in flight, unacked", err, s)
	}
	got = nil
	if err := q.Consume(ctx, "q", ConsumeOptions{TTL: time.Minute, Idle: 50 * time.Millisecond}, collect); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, q, "q"); len(got) != 1 || got[0] != "d" || s.Depth != 0 || s.InFlight != 1 {
		t.Fatalf("after Idle: handed %q, stats %+v; want d, and c still leased", got, s)
	}
}

// TestPushUntilKnown: a push whose item writes lose their replies, and
// whose reads fail, until Push gives up (ErrUnknown) is sent again under
// its ID, and the item is queued once; faults that never end leave the
// outcome unknown, with the item's ID.
func TestPushUntilKnown(t *testing.T) {
	st := memory.New()
	defer st.Close()
	h := &hookStore{Store: st}
	q := newQueue(t, h, Options{})
	var writes atomic.Int64
	h.readFails.Store(1 << 30)
	h.hook(func(row []byte, apply func() error) error {
		if err := apply(); err != nil || !isItemRow(row) {
			return err
		}
		if writes.Add(1) >= 8 {
			h.readFails.Store(0) // the store answers again
		}
		return errors.New("test: reply lost")
	})
	id, err := q.PushUntilKnown(ctx, "q", []byte("x"), 5)
	h.hook(nil)
	if err != nil || id == "" {
		t.Fatalf("pushed until known: %q, %v", id, err)
	}
	if s := stats(t, q, "q"); s.Depth != 1 {
		t.Fatalf("one item pushed through lost replies: stats %+v", s)
	}
	h.readFails.Store(1 << 30)
	h.hook(func(row []byte, apply func() error) error {
		if err := apply(); err != nil || !isItemRow(row) {
			return err
		}
		return errors.New("test: reply lost")
	})
	if id, err := q.PushUntilKnown(ctx, "q", []byte("y"), 2); !errors.Is(err, ErrUnknown) || id == "" {
		t.Fatalf("faults that never end: %q, %v; want an ID and ErrUnknown", id, err)
	}
}
