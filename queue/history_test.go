package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// history is one run of runHistory.
type history struct {
	items, pushers, workers int
	ttl                     time.Duration
	kill, nack, overrun     float64 // per delivery: the worker dies holding it; gives it back; works past its lease
	poison                  int     // one item in poison is nacked at every delivery (0: none)
	maxDeliveries           int
	opts                    Options
}

func (h history) limit() time.Duration { return time.Duration(h.items/100+60) * time.Second }

// delivery is one delivery as a worker saw it.
type delivery struct {
	lease      uint64
	n          int
	start, end time.Time // from Pop's return to the worker's last act under it
	fate       string    // acked, killed, nacked, overran, stale-ack
}

// runHistory pushes h.items through h.workers workers that die, give
// items back and overrun their leases at random, each worker a Queue of
// its own (a process), and checks the history:
//   - every item is acked or a dead letter, and a dead letter was
//     delivered MaxDeliveries times;
//   - no two deliveries of an item overlap in time (from Pop's return to
//     the end of the worker's acts under the lease);
//   - an item is delivered again only after a delivery that died, gave it
//     back, or overran its lease.
func runHistory(t *testing.T, st storage.Store, h history) {
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	opts := h.opts
	opts.MaxDeliveries = h.maxDeliveries
	if opts.MaxBackOff == 0 {
		opts.MaxBackOff = 5 * time.Millisecond
	}
	var (
		mu      sync.Mutex
		byItem  = map[string][]*delivery{}
		acked   atomic.Int64
		pushed  = map[string]bool{} // id: poison
		killed  atomic.Int64
		metrics Metrics
	)
	done := make(chan struct{})
	var doneOnce sync.Once
	finished := func() { doneOnce.Do(func() { close(done) }) }
	var wg sync.WaitGroup
	per := h.items / h.pushers
	for p := range h.pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := New(st, opts)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range per {
				body := fmt.Sprintf("%d/%d", p, i)
				if h.poison > 0 && i%h.poison == 0 {
					body = "poison " + body
				}
				id, err := q.Push(ctx, "h", []byte(body))
				if err != nil {
					t.Error(err)
					finished()
					return
				}
				mu.Lock()
				pushed[id] = strings.HasPrefix(body, "poison")
				mu.Unlock()
			}
		}()
	}
	total := int64(per * h.pushers)
	go func() { // the store's word on when all is done (a count can miss a dead letter whose reply was lost)
		q, _ := New(st, opts)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			mu.Lock()
			n := len(pushed)
			mu.Unlock()
			if s, err := q.Stats(ctx, "h"); err == nil && int64(n) == total && s.Depth == 0 && s.InFlight == 0 {
				finished()
				return
			}
		}
	}()
	var dead atomic.Int64
	for w := range h.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var q *Queue
			life := func() {
				if q != nil {
					m := q.Metrics()
					mu.Lock()
					metrics.Pops += m.Pops
					metrics.KeysVisited += m.KeysVisited
					metrics.Conflicts += m.Conflicts
					metrics.DeadLettered += m.DeadLettered
					mu.Unlock()
				}
				var err error
				if q, err = New(st, opts); err != nil {
					t.Error(err)
				}
			}
			life()
			defer life()
			for {
				select {
				case <-done:
					return
				default:
				}
				if acked.Load()+dead.Load() >= total {
					finished()
					return
				}
				pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				before := q.Metrics().DeadLettered
				d, err := q.Pop(pctx, "h", h.ttl)
				cancel()
				dead.Add(int64(q.Metrics().DeadLettered - before))
				if errors.Is(err, context.DeadlineExceeded) {
					continue
				}
				if err != nil {
					t.Error(err)
					finished()
					return
				}
				rec := &delivery{lease: d.lease, n: d.Deliveries, start: time.Now()}
				mu.Lock()
				byItem[d.ID] = append(byItem[d.ID], rec)
				mu.Unlock()
				r := rng.Float64()
				if strings.HasPrefix(string(d.Body), "poison") {
					r = h.kill // nacked
				}
				switch {
				case r < h.kill:
					rec.end, rec.fate = time.Now(), "killed"
					killed.Add(1)
					life() // a new process takes its place
					continue
				case r < h.kill+h.nack:
					rec.end, rec.fate = time.Now(), "nacked"
					if err := q.Nack(ctx, d, 0); err != nil {
						t.Errorf("nack: %v", err)
					}
					continue
				case r < h.kill+h.nack+h.overrun:
					for d.Valid() {
						time.Sleep(time.Millisecond)
					}
					rec.end, rec.fate = d.until, "overran"
				default:
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
					rec.end, rec.fate = time.Now(), "acked"
					if !d.Valid() {
						rec.end, rec.fate = d.until, "overran"
					}
				}
				switch err := q.Ack(ctx, d); {
				case err == nil:
					acked.Add(1)
				case errors.Is(err, ErrNotHeld) && rec.fate == "overran":
					rec.fate = "stale-ack"
				default:
					t.Errorf("ack (%s): %v", rec.fate, err)
				}
			}
		}()
	}
	timeout := time.AfterFunc(h.limit(), func() {
		q, _ := New(st, opts)
		s, err := q.Stats(ctx, "h")
		t.Errorf("history did not finish: %d acked, %d dead of %d; stats %+v %v", acked.Load(), dead.Load(), total, s, err)
		finished()
	})
	wg.Wait()
	timeout.Stop()
	if t.Failed() {
		return
	}
	q, _ := New(st, opts)
	deadList, err := q.Dead(ctx, "h", 0)
	if err != nil {
		t.Fatal(err)
	}
	isDead := map[string]bool{}
	for _, dl := range deadList {
		isDead[dl.ID] = true
		if dl.Deliveries != h.maxDeliveries {
			t.Errorf("dead letter %s after %d deliveries", dl.ID, dl.Deliveries)
		}
	}
	dups := 0
	for id, poison := range pushed {
		ds := byItem[id]
		if poison && (!isDead[id] || len(ds) != h.maxDeliveries) {
			t.Errorf("poison item %s: dead %v after %d deliveries", id, isDead[id], len(ds))
		}
		ackedOnce := false
		for i, d := range ds {
			if d.fate == "acked" || (d.fate == "overran" && i == len(ds)-1 && !isDead[id]) {
				ackedOnce = true
			}
			if d.n != i+1 {
				t.Errorf("item %s: delivery %d counted %d (a delivery unseen, or one counted twice)", id, i+1, d.n)
			}
			if i == 0 {
				continue
			}
			dups++
			prev := ds[i-1]
			if prev.fate == "acked" {
				t.Errorf("item %s delivered again (lease %x) after an ack that succeeded", id, d.lease)
			}
			if d.start.Before(prev.end) {
				t.Errorf("item %s: delivery %d began %v before delivery %d (%s) ended", id, i+1, prev.end.Sub(d.start), i, prev.fate)
			}
		}
		if !ackedOnce && !isDead[id] {
			t.Errorf("item %s lost: deliveries %+v", id, ds)
		}
	}
	if len(pushed) != int(total) {
		t.Fatalf("%d pushed, want %d", len(pushed), total)
	}
	s, err := q.Stats(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if s.Depth != 0 || s.InFlight != 0 || s.Dead != len(deadList) {
		t.Errorf("stats at the end: %+v (%d dead letters)", s, len(deadList))
	}
	perPop := 0.0
	if metrics.Pops > 0 {
		perPop = float64(metrics.KeysVisited) / float64(metrics.Pops)
	}
	t.Logf("%d items, %d deliveries again, %d dead letters, %d workers killed, %d claims lost to another, %.1f keys visited per pop",
		total, dups, len(deadList), killed.Load(), metrics.Conflicts, perPop)
}
