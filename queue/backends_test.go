package queue

import (
	"bytes"
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/clockstores"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// rowDeletes counts the whole-row deletions sent to a store (none
// expected), forwarding the clock and counted scans.
type rowDeletes struct {
	storage.Store
	n atomic.Int64
}

func (r *rowDeletes) count(ms []storage.Mutation) {
	for _, m := range ms {
		if m.Kind == storage.DeleteRow {
			r.n.Add(1)
		}
	}
}

func (r *rowDeletes) Now(ctx context.Context) (time.Time, error) {
	return r.Store.(storage.Clock).Now(ctx)
}

func (r *rowDeletes) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	return r.Store.(storage.Counted).ScanCounted(ctx, start, end, filter, limit, fn)
}

func (r *rowDeletes) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	r.count(a)
	r.count(b)
	return r.Store.CheckAndMutate(ctx, row, p, a, b)
}

func (r *rowDeletes) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	r.count(ms)
	return r.Store.Mutate(ctx, row, ms...)
}

// TestBackends: the history on every backend with a clock, and on
// memory and Pebble behind a store that fails calls, loses replies,
// delivers nonce-less calls again late and fails reads
// (storagetest.Lossy): every call is re-sent and recognises its own
// earlier success, and runHistory's checks hold. The queue deletes
// cells, never whole rows (a row deletion costs a DB sharing the store a
// pass over its cell index).
func TestBackends(t *testing.T) {
	all := clockstores.All()
	var counted *rowDeletes
	countedMemory := clockstores.Backend{Name: "memory", Open: func(t *testing.T) storage.Store {
		counted = &rowDeletes{Store: memory.New()}
		return counted
	}}
	for _, b := range append(all, clockstores.Lossy(countedMemory, clockstores.Faults), clockstores.Lossy(all[1], clockstores.Faults)) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			runHistory(t, st, history{items: 600, pushers: 2, workers: 8, ttl: 150 * time.Millisecond,
				kill: 0.03, nack: 0.03, overrun: 0.01, poison: 100, maxDeliveries: 3})
		})
	}
	if n := counted.n.Load(); n > 0 {
		t.Errorf("%d whole-row deletions", n)
	}
}

// TestFaultSuiteSoak: longer histories on every backend with a clock behind
// storagetest.Lossy, with more faults. Set PERCOLATOR_FAULT_SUITE=1 to
// run it.
func TestFaultSuiteSoak(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("a fault soak: set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	heavy := clockstores.Faults
	heavy.FailBefore, heavy.LoseReply, heavy.ReadFail = 0.1, 0.1, 0.1
	for _, b := range clockstores.All() {
		b = clockstores.Lossy(b, heavy)
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			runHistory(t, st, history{items: 600, pushers: 2, workers: 8, ttl: 100 * time.Millisecond,
				kill: 0.02, nack: 0.03, overrun: 0.01, poison: 150, maxDeliveries: 3,
				opts: Options{Grace: 300 * time.Millisecond, CatchUp: 100 * time.Millisecond}})
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
			// The goroutines end before the store closes (defers run last
			// first): an Ack on a closed store would fail the test.
			var wg sync.WaitGroup
			defer wg.Wait()
			stop := make(chan struct{})
			defer close(stop)
			wg.Add(2)
			go func() { // keep the consumer's cursor moving: a fast stream of other items
				defer wg.Done()
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
				defer wg.Done()
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
