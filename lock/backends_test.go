package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/clockstores"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// flaky fails conditional writes after applying them one time in ten (an
// unknown outcome), and forwards the clock.
type flaky struct {
	storage.Store
	n atomic.Int64
}

func (f *flaky) Now(ctx context.Context) (time.Time, error) { return f.Store.(storage.Clock).Now(ctx) }

func (f *flaky) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, a, b []storage.Mutation) (bool, error) {
	m, err := f.Store.CheckAndMutate(ctx, row, p, a, b)
	if err == nil && f.n.Add(1)%10 == 0 {
		return false, errors.New("injected: applied, reply lost")
	}
	return m, err
}

// TestBackends: contenders on every backend with a clock (memory, Pebble,
// the single server over gRPC, the Bigtable emulator), and on one whose
// conditional writes lose their replies: tokens strictly increase and no
// two holders act at once.
func TestBackends(t *testing.T) {
	for _, b := range append(clockstores.All(), clockstores.Backend{Name: "lost replies", Open: func(t *testing.T) storage.Store { return &flaky{Store: memory.New()} }}) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			contend(t, st, contention{n: 8, d: 800 * time.Millisecond, ttl: 200 * time.Millisecond, minGrants: 10})
		})
	}
}

// contention is one run of contend.
type contention struct {
	n         int           // contenders
	d         time.Duration // how long they contend
	ttl       time.Duration // their leases
	deaths    bool          // one grant in five, the holder dies holding it
	overruns  bool          // one in eight, it works past its lease
	minGrants int           // fewer grants check too little
}

// contend runs c.n contenders on one lock of st; each acts while its
// lease is valid and records when. No two holders act at once, and
// tokens strictly increase.
func contend(t *testing.T, st storage.Store, c contention) {
	type act struct {
		token      uint64
		start, end time.Time
	}
	var (
		mu   sync.Mutex
		acts []act
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(c.d)
	for i := range c.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk, err := New(st, Options{Holder: fmt.Sprint("c", i), MaxBackOff: 5 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			for time.Now().Before(deadline) {
				l, err := lk.Acquire(context.Background(), "res", c.ttl)
				if err != nil {
					t.Error(err)
					return
				}
				start := time.Now()
				work := time.Duration(rng.IntN(3000)) * time.Microsecond
				if c.overruns && rng.IntN(8) == 0 {
					work = c.ttl + 40*time.Millisecond // past the lease: it must stop when the lease ends
				}
				for l.Valid() && time.Since(start) < work {
					time.Sleep(200 * time.Microsecond)
				}
				end := time.Now()
				if !l.Valid() {
					end = l.until
				}
				mu.Lock()
				acts = append(acts, act{l.Token, start, end})
				mu.Unlock()
				if c.deaths && rng.IntN(5) == 0 {
					return // dies holding the lock: its lease expires
				}
				// Only a lease that ran out (an overrun) may be taken already.
				if err := lk.Release(context.Background(), l); err != nil && !(c.overruns && errors.Is(err, ErrNotHeld)) {
					t.Errorf("release (re-sent after a lost reply if need be): %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	sort.Slice(acts, func(i, j int) bool { return acts[i].token < acts[j].token })
	for i := 1; i < len(acts); i++ {
		a, b := acts[i-1], acts[i]
		if b.token <= a.token {
			t.Fatalf("token %d granted twice", b.token)
		}
		if b.start.Before(a.end) {
			t.Fatalf("holder of token %d acted from %v, before the holder of token %d stopped (%v)", b.token, b.start, a.token, a.end)
		}
	}
	if len(acts) < c.minGrants {
		t.Fatalf("only %d grants: the test checked little", len(acts))
	}
	t.Logf("%d grants", len(acts))
}
