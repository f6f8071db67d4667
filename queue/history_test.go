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

	"github.com/seed-992972ee/percolator/internal/clockstores"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/storagetest"
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

// stall is how long a history may go without any progress (a push, a
// delivery, an ack) before it is judged hung: a bound for hangs only,
// whatever the machine's speed.
const stall = 90 * time.Second

// delivery is one delivery as a worker saw it.
type delivery struct {
	lease      uint64
	n          int
	start, end time.Time // from Pop's return to the worker's last act under it
	fate       string    // acked, killed, nacked, overran, stale-ack
}

// faulty is a lossy store's control: its faults can be turned off to
// check the end state, and counted.
type faulty interface {
	SetEnabled(bool)
	Stats() storagetest.LossyStats
}

// runHistory pushes h.items through h.workers workers that die, give
// items back and overrun their leases at random, each worker a Queue of
// its own (a process), and checks the history:
//   - every item is acked or a dead letter, and a dead letter was
//     delivered MaxDeliveries times;
//   - no two deliveries of an item overlap in time (from Pop's return to
//     the end of the worker's acts under the lease);
//   - an item is delivered again only after a delivery that died, gave it
//     back, or overran its lease;
//   - each body is queued once: a push that failed is sent again as the
//     API says (PushAgain with the ID it returned), and no Pop delivers
//     an item its pushers do not know;
//   - Stats converge: nothing waiting or in flight at the end, the dead
//     letters counted.
//
// Calls that fail (a store that fails them) are made again: Pop, Ack and
// Nack are safe to repeat under a lease. The run ends when the work is
// done; it is judged hung only after stall without progress.
func runHistory(t *testing.T, st storage.Store, h history) {
	seed := clockstores.Seed(t)
	opts := h.opts
	opts.MaxDeliveries = h.maxDeliveries
	if opts.MaxBackOff == 0 {
		opts.MaxBackOff = 5 * time.Millisecond
	}
	ctx, finish := context.WithCancel(context.Background())
	defer finish()
	var (
		mu       sync.Mutex
		byItem   = map[string][]*delivery{}
		pushed   = map[string]string{} // id: body
		acked    atomic.Int64
		dead     atomic.Int64
		killed   atomic.Int64
		failed   atomic.Int64 // calls that failed and were made again
		progress atomic.Int64
		metrics  Metrics
	)
	per := h.items / h.pushers
	total := int64(per * h.pushers)
	var wg sync.WaitGroup
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
				for err != nil && ctx.Err() == nil {
					failed.Add(1)
					if id != "" {
						id, err = q.PushAgain(ctx, "h", id, []byte(body))
					} else {
						id, err = q.Push(ctx, "h", []byte(body))
					}
				}
				if err != nil {
					return
				}
				mu.Lock()
				pushed[id] = body
				mu.Unlock()
				progress.Add(1)
			}
		}()
	}
	allPushed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(pushed)) == total
	}
	wg.Add(1)
	go func() { // the store's word on when all is done (a count can miss a dead letter whose reply was lost)
		defer wg.Done()
		q, _ := New(st, opts)
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			if s, err := q.Stats(ctx, "h"); err == nil && allPushed() && s.Depth == 0 && s.InFlight == 0 {
				finish()
			}
		}
	}()
	wg.Add(1)
	go func() { // a hang is no progress for stall, however slow the machine
		defer wg.Done()
		last, since := progress.Load(), time.Now()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if p := progress.Load(); p != last {
				last, since = p, time.Now()
				continue
			}
			if time.Since(since) > stall {
				q, _ := New(st, opts)
				s, err := q.Stats(context.Background(), "h")
				t.Errorf("history stalled for %v: %d acked, %d dead of %d; stats %+v %v", stall, acked.Load(), dead.Load(), total, s, err)
				finish()
			}
		}
	}()
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
			for ctx.Err() == nil {
				if acked.Load()+dead.Load() >= total {
					finish()
					return
				}
				before := q.Metrics().DeadLettered
				d, err := q.Pop(ctx, "h", h.ttl)
				if n := q.Metrics().DeadLettered - before; n > 0 {
					dead.Add(int64(n))
					progress.Add(1)
				}
				if errors.Is(err, context.Canceled) {
					return
				}
				if err != nil {
					failed.Add(1)
					continue // the store kept failing: look again
				}
				progress.Add(1)
				rec := &delivery{lease: d.lease, n: d.Deliveries, start: time.Now()}
				mu.Lock()
				byItem[d.ID] = append(byItem[d.ID], rec)
				mu.Unlock()
				if work(t, q, d, rec, h, rng, &failed) {
					acked.Add(1)
				}
				if rec.fate == "killed" {
					killed.Add(1)
					life() // a new process takes its place
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if f, ok := st.(faulty); ok {
		f.SetEnabled(false)
		t.Logf("faults: %+v", f.Stats())
	}
	checkHistory(t, st, h, opts, pushed, byItem)
	perPop := 0.0
	if metrics.Pops > 0 {
		perPop = float64(metrics.KeysVisited) / float64(metrics.Pops)
	}
	t.Logf("%d items, %d workers killed, %d claims lost to another, %d calls failed and made again, %.1f keys visited per pop",
		total, killed.Load(), metrics.Conflicts, failed.Load(), perPop)
}

// work is a worker's handling of delivery d: it dies holding it, gives it
// back, overruns its lease or acks it, as h's odds say (a poison item is
// always given back). Calls that fail are made again. It reports whether
// the item was acked.
func work(t *testing.T, q *Queue, d *Delivery, rec *delivery, h history, rng *rand.Rand, failed *atomic.Int64) bool {
	ctx := context.Background()
	r := rng.Float64()
	if strings.HasPrefix(string(d.Body), "poison") {
		r = h.kill // nacked
	}
	switch {
	case r < h.kill:
		rec.end, rec.fate = time.Now(), "killed"
		return false
	case r < h.kill+h.nack:
		rec.end, rec.fate = time.Now(), "nacked"
		err := q.Nack(ctx, d, 0)
		for ; err != nil && !errors.Is(err, ErrNotHeld); err = q.Nack(ctx, d, 0) {
			failed.Add(1)
		}
		switch {
		case err == nil:
		case !d.Valid(): // a slow machine: the lease ran out on the way
			rec.end, rec.fate = d.until, "overran"
		default:
			t.Errorf("nack under a live lease: %v", err)
		}
		return false
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
	err := q.Ack(ctx, d)
	for ; err != nil && !errors.Is(err, ErrNotHeld); err = q.Ack(ctx, d) {
		failed.Add(1)
	}
	switch {
	case err == nil:
		return true
	case rec.fate == "overran" || !d.Valid():
		// The lease ran out before the ack landed: planned, or a slow
		// machine's. Refused under a lease still valid is the bug.
		rec.end, rec.fate = d.until, "stale-ack"
	default:
		t.Errorf("ack (%s) under a live lease: %v", rec.fate, err)
	}
	return false
}

// checkHistory checks a finished history (runHistory's list).
func checkHistory(t *testing.T, st storage.Store, h history, opts Options, pushed map[string]string, byItem map[string][]*delivery) {
	ctx := context.Background()
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
	bodies := map[string]string{}
	for id, body := range pushed {
		if other, ok := bodies[body]; ok {
			t.Errorf("body %q queued twice: items %s and %s", body, other, id)
		}
		bodies[body] = id
	}
	for id := range byItem {
		if _, ok := pushed[id]; !ok {
			t.Errorf("item %s delivered, but no pusher knows it (pushed twice?)", id)
		}
	}
	for id, body := range pushed {
		ds := byItem[id]
		poison := strings.HasPrefix(body, "poison")
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
	if len(pushed) != h.items/h.pushers*h.pushers {
		t.Fatalf("%d pushed, want %d", len(pushed), h.items)
	}
	s, err := q.Stats(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	if s.Depth != 0 || s.InFlight != 0 || s.Dead != len(deadList) {
		t.Errorf("stats at the end: %+v (%d dead letters)", s, len(deadList))
	}
	again := 0
	for _, ds := range byItem {
		again += len(ds) - 1
	}
	t.Logf("%d deliveries again, %d dead letters", again, len(deadList))
}
