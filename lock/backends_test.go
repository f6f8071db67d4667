package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/clockstores"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// faulty is what the tests ask of a lossy store: its fault counts, and
// faults off to check the end state.
type faulty interface {
	SetEnabled(bool)
	Stats() storagetest.LossyStats
}

// TestBackends: contenders on every backend with a clock (memory, Pebble,
// the single server over gRPC, the Bigtable emulator), and on memory,
// Pebble and the server behind a store that fails calls, loses replies,
// delivers nonce-less calls again late and fails reads
// (storagetest.Lossy): contend's checks, holders renewing their leases.
func TestBackends(t *testing.T) {
	all := clockstores.All()
	faults := clockstores.Faults // a lock's writes are few: lose more of them
	faults.FailBefore, faults.LoseReply = 0.1, 0.1
	for _, b := range append(all, clockstores.Lossy(all[0], faults), clockstores.Lossy(all[1], faults), clockstores.Lossy(all[2], faults)) {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			contend(t, st, contention{n: 6, grants: 24, ttl: 80 * time.Millisecond, renew: 0.15, death: 0.15})
		})
	}
}

// TestFaultSuiteSoak: longer contention, on stores with every fault, with
// deaths, overruns and renewals. Set PERCOLATOR_FAULT_SUITE=1 to run it.
func TestFaultSuiteSoak(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("a fault soak: set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	all := clockstores.All()
	heavy := clockstores.Faults
	heavy.FailBefore, heavy.LoseReply = 0.1, 0.1
	for _, b := range []clockstores.Backend{clockstores.Lossy(all[0], heavy), clockstores.Lossy(all[1], heavy), clockstores.Lossy(all[2], heavy), clockstores.Lossy(all[3], clockstores.Faults)} {
		t.Run(b.Name, func(t *testing.T) {
			st := b.Open(t)
			defer st.Close()
			contend(t, st, contention{n: 16, grants: 400, ttl: 60 * time.Millisecond, renew: 0.2, overrun: 0.1, death: 0.1})
		})
	}
}

// contention is one run of contend.
type contention struct {
	n      int           // contenders
	grants int           // the run ends after this many grants
	ttl    time.Duration // their leases
	// Fractions of the grants whose holder works past its lease and
	// renews it every third of its TTL; works past its lease without
	// renewing (it must stop when the lease ends); dies holding it.
	renew, overrun, death float64
}

// act is a holder's use of one grant: from its Acquire's return to when
// it stopped acting (at the latest its lease's deadline).
type act struct {
	token, ticket uint64
	start, end    time.Time
}

// contend runs c.n contenders on one lock of st until c.grants grants,
// each acting while its lease is valid and recording when, and checks:
// tokens never repeat; no two holders act at once (the acts of different
// tokens do not overlap, in token order); the waiters are served in
// ticket order (the tickets of the grants, in token order, increase).
// Contenders whose call fails (a store that keeps failing) try again.
func contend(t *testing.T, st storage.Store, c contention) {
	var (
		mu   sync.Mutex
		acts []act
		wg   sync.WaitGroup
	)
	seed := clockstores.Seed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acts) >= c.grants
	}
	record := func(a act) {
		mu.Lock()
		acts = append(acts, a)
		mu.Unlock()
	}
	var failures, renewals, deaths, lost int
	for i := range c.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk, err := New(st, Options{Holder: fmt.Sprint("c", i), MaxBackOff: 5 * time.Millisecond})
			if err != nil {
				t.Error(err)
				return
			}
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for !done() {
				l, err := lk.Acquire(ctx, "res", c.ttl)
				if errors.Is(err, context.Canceled) {
					return
				}
				if err != nil {
					mu.Lock()
					failures++
					mu.Unlock()
					continue // the store kept failing: try again
				}
				a, fate := hold(ctx, lk, l, c, rng)
				record(a)
				mu.Lock()
				switch fate {
				case "renewed":
					renewals++
				case "died":
					deaths++
				case "lost":
					lost++
				}
				mu.Unlock()
				if done() {
					cancel()
				}
				if fate == "died" {
					lk, _ = New(st, Options{Holder: fmt.Sprint("c", i, "'"), MaxBackOff: 5 * time.Millisecond}) // a new process takes its place
				}
			}
		}()
	}
	watch := time.AfterFunc(10*time.Minute, func() { t.Errorf("contention hung: %d grants", len(acts)); cancel() })
	wg.Wait()
	watch.Stop()
	if f, ok := st.(faulty); ok {
		f.SetEnabled(false)
		t.Logf("faults: %+v", f.Stats())
	}
	checkActs(t, acts)
	t.Logf("%d grants, %d renewals, %d holders died, %d leases lost, %d calls failed and were made again", len(acts), renewals, deaths, lost, failures)
}

// hold acts under l as c says, and reports what it did and what became of
// the lease.
func hold(ctx context.Context, lk *Locker, l *Lease, c contention, rng *rand.Rand) (act, string) {
	a := act{token: l.Token, ticket: l.ticket, start: time.Now()}
	work := time.Duration(rng.IntN(3000)) * time.Microsecond
	fate := "released"
	switch r := rng.Float64(); {
	case r < c.renew:
		work, fate = c.ttl*3/2, "renewed"
	case r < c.renew+c.overrun:
		work, fate = c.ttl+40*time.Millisecond, "overran"
	}
	renewAt := a.start.Add(c.ttl / 3)
	for l.Valid() && time.Since(a.start) < work {
		if fate == "renewed" && time.Now().After(renewAt) {
			if err := lk.Renew(ctx, l); err != nil {
				fate = "lost" // it acts on only until its deadline
			}
			renewAt = time.Now().Add(c.ttl / 3)
		}
		time.Sleep(200 * time.Microsecond)
	}
	a.end = time.Now()
	if !l.Valid() {
		a.end = l.Deadline()
	}
	if rng.Float64() < c.death {
		return a, "died" // dies holding the lock: its lease expires
	}
	if err := lk.Release(context.WithoutCancel(ctx), l); err != nil && !errors.Is(err, ErrNotHeld) && fate == "released" {
		fate = "lost" // the store kept failing: the lease expires
	}
	return a, fate
}

// checkActs checks the acts of a contention: tokens never repeat; in
// token order, each act starts after the one before ended (so tokens
// never go back in time and no two holders act at once); the tickets
// served increase.
func checkActs(t *testing.T, acts []act) {
	t.Helper()
	sort.Slice(acts, func(i, j int) bool { return acts[i].token < acts[j].token })
	var lastTicket uint64
	for i, b := range acts {
		if i > 0 {
			a := acts[i-1]
			if b.token == a.token {
				t.Fatalf("token %d granted twice", b.token)
			}
			if b.start.Before(a.end) {
				t.Fatalf("holder of token %d acted from %v, %v before the holder of token %d stopped", b.token, b.start, a.end.Sub(b.start), a.token)
			}
		}
		if b.ticket != 0 {
			if b.ticket <= lastTicket {
				t.Fatalf("token %d served ticket %d after ticket %d: not in ticket order", b.token, b.ticket, lastTicket)
			}
			lastTicket = b.ticket
		}
	}
}
