package queue

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/clockstores"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// flaky loses one write's reply in sixteen, half of them before the
// write applied and half after (an unknown outcome either way), and
// forwards the clock and counted scans.
type flaky struct {
	storage.Store
	n          atomic.Int64
	rowDeletes atomic.Int64 // DeleteRow mutations sent: none expected
}

func (f *flaky) count(ms []storage.Mutation) {
	for _, m := range ms {
		if m.Kind == storage.DeleteRow {
			f.rowDeletes.Add(1)
		}
	}
}

var errInjected = errors.New("injected: reply lost")

func (f *flaky) fail() (before, after bool) {
	switch f.n.Add(1) % 32 {
	case 7:
		return true, false
	case 23:
		return false, true
	}
	return false, false
}

func (f *flaky) Now(ctx context.Context) (time.Time, error) { return f.Store.(storage.Clock).Now(ctx) }

func (f *flaky) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	return f.Store.(storage.Counted).ScanCounted(ctx, start, end, filter, limit, fn)
}

func (f *flaky) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	f.count(a)
	f.count(b)
	before, after := f.fail()
	if before {
		return false, errInjected
	}
	m, err := f.Store.CheckAndMutate(ctx, row, p, a, b)
	if err == nil && after {
		return false, errInjected
	}
	return m, err
}

func (f *flaky) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	f.count(ms)
	before, after := f.fail()
	if before {
		return errInjected
	}
	err := f.Store.Mutate(ctx, row, ms...)
	if err == nil && after {
		return errInjected
	}
	return err
}

// TestBackends: the history on every backend with a clock, and on a
// store that loses write replies (every call is re-sent and recognises
// its own earlier success). The queue deletes cells, never whole rows (a
// row deletion costs a DB sharing the store a pass over its cell index).
func TestBackends(t *testing.T) {
	for _, b := range append(clockstores.All(), clockstores.Backend{Name: "lost replies", Open: func(t *testing.T) storage.Store { return &flaky{Store: memory.New()} }}) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			runHistory(t, st, history{items: 600, pushers: 2, workers: 8, ttl: 150 * time.Millisecond,
				kill: 0.03, nack: 0.03, overrun: 0.01, poison: 100, maxDeliveries: 3})
			if f, ok := st.(*flaky); ok && f.rowDeletes.Load() > 0 {
				t.Errorf("%d whole-row deletions", f.rowDeletes.Load())
			}
		})
	}
}

// slow delays the first write of an index entry by delay, as a process
// stalled between its clock reading and its write. One goroutine only.
type slow struct {
	storage.Store
	delay time.Duration
	done  bool
}

func (s *slow) Now(ctx context.Context) (time.Time, error) { return s.Store.(storage.Clock).Now(ctx) }

func (s *slow) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	if bytes.Contains(row, []byte("\x00v")) && !s.done {
		s.done = true
		time.Sleep(s.delay)
	}
	return s.Store.Mutate(ctx, row, ms...)
}

// TestLateEntries: a push whose entry lands behind a busy consumer's
// cursor (stalled longer than the cursor's lag, shorter than Grace) is
// found by the catch-up; one stalled longer than Grace is moved by its
// pusher to a fresh entry. Both are delivered, within Grace + CatchUp of
// landing.
func TestLateEntries(t *testing.T) {
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"behind the cursor", 120 * time.Millisecond}, {"past grace", 260 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			st := memory.New()
			defer st.Close()
			opts := Options{Grace: 200 * time.Millisecond, CatchUp: 50 * time.Millisecond, MaxBackOff: 2 * time.Millisecond}
			consumer := newQueue(t, st, opts)
			ticker := newQueue(t, st, opts)
			pusher := newQueue(t, &slow{Store: st, delay: c.delay}, opts)
			stop := make(chan struct{})
			defer close(stop)
			go func() { // keep the consumer's cursor moving: a fast stream of other items
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					if _, err := ticker.Push(ctx, "q", []byte("tick")); err != nil {
						return
					}
				}
			}()
			got := make(chan string, 1024)
			go func() { // the consumer, busy all along: its cursor keeps up with the ticks
				for {
					select {
					case <-stop:
						return
					default:
					}
					pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					d, err := consumer.Pop(pctx, "q", time.Minute)
					cancel()
					if err != nil {
						continue
					}
					if err := consumer.Ack(ctx, d); err != nil {
						t.Error(err)
						return
					}
					if string(d.Body) != "tick" {
						got <- d.ID
					}
				}
			}()
			time.Sleep(100 * time.Millisecond)
			start := time.Now()
			id, err := pusher.Push(ctx, "q", []byte("late"))
			if err != nil {
				t.Fatal(err)
			}
			landed := time.Now()
			select {
			case g := <-got:
				if g != id {
					t.Fatalf("delivered %s, want %s", g, id)
				}
				t.Logf("delivered %v after its push began, %v after it returned", time.Since(start).Round(time.Millisecond), time.Since(landed).Round(time.Millisecond))
			case <-time.After(3 * time.Second):
				t.Fatal("the late item was not delivered")
			}
		})
	}
}
