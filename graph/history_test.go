package graph

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage/memory"
)

func seed(t *testing.T) uint64 {
	if s, err := strconv.ParseUint(os.Getenv("PERCOLATOR_SEED"), 10, 64); err == nil {
		return s
	}
	s := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with PERCOLATOR_SEED=%d)", s, s)
	return s
}

// TestRandomHistory: goroutines insert, update, delete and increment a few
// edges through a store whose every call fails one time in ten, before or
// after it is applied (S2Graph's FailProb), each mutation re-sent with its
// ID until it returns; locks whose holder gave up expire and are taken
// over. At the end check passes, and each edge's snapshot is the fold of
// the mutations applied, in version order.
func TestRandomHistory(t *testing.T) {
	s := seed(t)
	mem := memory.New()
	defer mem.Close()
	fs := newFaultStore(mem, s)
	fs.failBefore, fs.failAfter = 0.05, 0.05
	opts := Options{MaxBackOff: 2 * time.Millisecond, MaxRetries: 4, LockExpiry: 30 * time.Millisecond}
	g := New(fs, opts)
	if err := New(mem, opts).CreateLabel(ctx, rates); err != nil {
		t.Fatal(err)
	}
	per := 60
	if testing.Short() {
		per = 20
	}
	h := graphHistory{edges: 3, workers: 8, per: per, increments: true}
	applied := h.run(t, g, s)
	t.Logf("%d store calls, %d injected failures", fs.calls.Load(), fs.errs.Load())
	clean := New(mem, Options{})
	rep := checkClean(t, clean, "rates")
	if rep.Locked != 0 {
		t.Fatalf("%d edges still locked after every mutation returned", rep.Locked)
	}
	checkFold(t, clean, applied)
}

// graphHistory is a random history of mutations of the edges u -> p<i>
// of the rates label, each re-sent with its ID until it returns.
type graphHistory struct {
	edges, workers, per int
	// increments adds Increment operations, which only a strong label
	// applies once when re-sent (it recognises the ID).
	increments bool
	// own gives each worker edges of its own (edges per worker): one
	// writer per edge at a time, as weak labels need.
	own bool
}

// run runs h on g and returns, per target, the mutations that were
// applied (not dropped).
func (h graphHistory) run(t *testing.T, g *Graph, s uint64) map[string][]Mutation {
	t.Helper()
	var ts atomic.Int64
	var mu sync.Mutex
	applied := map[string][]Mutation{}
	var wg sync.WaitGroup
	for w := range h.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s, uint64(w)))
			for range h.per {
				e := rng.IntN(h.edges)
				if h.own {
					e += w * h.edges
				}
				m := Mutation{Label: "rates", Src: "u", Tgt: fmt.Sprint("p", e), TS: ts.Add(1), ID: rng.Uint64() | 1}
				switch r := rng.IntN(10); {
				case r < 2:
					m.Op = Delete
				case r < 4 && h.increments:
					m.Op = Increment
					m.Props = Props{"visits": IntValue(int64(rng.IntN(5) + 1))}
				case r < 7:
					m.Op = Update
					m.Props = rating(float64(rng.IntN(4)))
				default:
					m.Op = Insert
					m.Props = Props{"rating": FloatValue(float64(rng.IntN(4))), "note": StringValue(fmt.Sprint("n", rng.IntN(3)))}
				}
				var r Result
				var err error
				for try := 0; ; try++ {
					if r, err = g.Mutate(ctx, m); err == nil {
						break
					}
					if try > 200 {
						t.Errorf("mutation %x: still failing: %v", m.ID, err)
						return
					}
				}
				if !r.Dropped {
					mu.Lock()
					applied[m.Tgt] = append(applied[m.Tgt], m)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return applied
}

// checkFold checks that each edge's snapshot is the fold of the mutations
// applied to it, in version order.
func checkFold(t *testing.T, g *Graph, applied map[string][]Mutation) {
	t.Helper()
	for tgt, ms := range applied {
		sort.Slice(ms, func(i, j int) bool { return ms[i].TS < ms[j].TS })
		var want edgeState
		for i := range ms {
			want = want.apply(&ms[i])
		}
		got, live, err := g.GetEdge(ctx, "rates", "u", tgt)
		if err != nil {
			t.Fatal(err)
		}
		if live != want.live() || (live && fmt.Sprint(got.Props) != fmt.Sprint(want.props())) {
			t.Errorf("edge %s: %v live %v; the %d applied mutations fold to %v live %v", tgt, got.Props, live, len(ms), want.props(), want.live())
		}
	}
}

// TestCrashPoints: a process dies after each store call of an update (the
// lock's CAS, part of the EdgeMutate, the release): another process's
// check, once the lock has expired, rolls the edge forward. The indices
// and degrees then equal the snapshot, which holds the update exactly
// when its lock was taken.
func TestCrashPoints(t *testing.T) {
	for n := 0; ; n++ {
		mem := memory.New()
		fs := newFaultStore(mem, 1)
		var c clock
		opts := Options{MaxRetries: 1, MaxBackOff: time.Millisecond, LockExpiry: time.Second, Now: c.now}
		g := New(fs, opts)
		if err := g.CreateLabel(ctx, rates); err != nil {
			t.Fatal(err)
		}
		mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "jone", Tgt: "mcd", TS: 1, Props: rating(1)})
		mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "jone", Tgt: "kfc", TS: 1, Props: rating(2)})
		fs.crashAfter.Store(int64(n))
		_, err := g.Mutate(ctx, Mutation{Op: Update, Label: "rates", Src: "jone", Tgt: "mcd", TS: 2, Props: rating(3), ID: 99})
		if err == nil {
			mem.Close()
			t.Logf("the update takes %d store calls; each crash point checked", n)
			if n < 5 {
				t.Fatalf("an update of %d calls: the crash points cover too little", n)
			}
			return
		}
		s, _, ferr := New(mem, opts).fetch(ctx, snapshotRow("rates", "jone", "mcd"))
		if ferr != nil {
			t.Fatal(ferr)
		}
		lockTaken := s.locked()
		c.add(2 * time.Second)
		other := New(mem, opts)
		rep := checkClean(t, other, "rates")
		e, _, _ := other.GetEdge(ctx, "rates", "jone", "mcd")
		want := 1.0
		if lockTaken {
			want = 3
			if rep.Repaired != 1 {
				t.Fatalf("crash after %d calls: the expired lock was not rolled forward (%+v)", n, rep)
			}
		}
		if e.Props["rating"].F != want {
			t.Fatalf("crash after %d calls (lock taken %v): rating %v, want %v", n, lockTaken, e.Props["rating"].F, want)
		}
		if got := ratingsOut(t, other, "jone"); len(got) != 2 {
			t.Fatalf("crash after %d calls: jone's index %v", n, got)
		}
		mem.Close()
	}
}

// TestDelayedWriteAfterTakeover: the holder of a lock stalls with one
// index write in flight; its lock expires and a second mutation takes it
// over, rolls the first forward, applies its own (rating 5) and releases.
// The stalled write (insert rating=3) then lands: it changes nothing, and
// the index holds 5 alone. Every write is also sent twice.
func TestDelayedWriteAfterTakeover(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	fs := newFaultStore(mem, 1)
	fs.dup = true
	var c clock
	opts := Options{MaxBackOff: time.Millisecond, MaxRetries: 3, LockExpiry: time.Second, Now: c.now}
	g := New(fs, opts)
	if err := g.CreateLabel(ctx, rates); err != nil {
		t.Fatal(err)
	}
	mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "jone", Tgt: "mcd", TS: 1, Props: rating(1)})
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.beforeCAS = func(ctx context.Context, row []byte) {
		if ctx.Value(ctxKey{}) == "slow" && string(row[:len(rowPrefix)+2]) == rowPrefix+"i/" {
			once.Do(func() { close(stalled); <-release })
		}
	}
	slow := make(chan error, 1)
	go func() {
		_, err := g.Mutate(context.WithValue(ctx, ctxKey{}, "slow"), Mutation{Op: Update, Label: "rates", Src: "jone", Tgt: "mcd", TS: 2, Props: rating(3)})
		slow <- err
	}()
	<-stalled
	c.add(2 * time.Second) // the slow holder's lock expires
	mustMutate(t, g, Mutation{Op: Update, Label: "rates", Src: "jone", Tgt: "mcd", TS: 3, Props: rating(5)})
	close(release)
	err := <-slow
	if err != nil && !errors.Is(err, ErrLocked) {
		t.Fatalf("the slow holder: %v", err)
	}
	if got := ratingsOut(t, g, "jone"); len(got) != 1 || got[0] != 5 {
		t.Fatalf("jone's index after the late write: %v, want [5]", got)
	}
	checkClean(t, New(mem, opts), "rates")
}

// TestTakenOverBeforeRelease: holder A stalls mid-EdgeMutate, its lock
// expires and B takes it over, then B stalls too; A resumes and its
// release finds the lock taken. A's mutation is not failed: A fetches,
// finds its mutation queued under B's lock, drives it to Done, and both
// return success; the edge holds B's (newer) value.
func TestTakenOverBeforeRelease(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	fs := newFaultStore(mem, 1)
	var c clock
	opts := Options{MaxBackOff: time.Millisecond, MaxRetries: 5, LockExpiry: time.Second, Now: c.now}
	g := New(fs, opts)
	if err := g.CreateLabel(ctx, rates); err != nil {
		t.Fatal(err)
	}
	mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "jone", Tgt: "mcd", TS: 1, Props: rating(1)})
	stalled := map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{})}
	release := map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{})}
	var once = map[string]*sync.Once{"A": {}, "B": {}}
	fs.beforeCAS = func(ctx context.Context, row []byte) {
		who, _ := ctx.Value(ctxKey{}).(string)
		if o := once[who]; o != nil && string(row[:len(rowPrefix)+2]) == rowPrefix+"i/" {
			o.Do(func() { close(stalled[who]); <-release[who] })
		}
	}
	errs := map[string]chan error{"A": make(chan error, 1), "B": make(chan error, 1)}
	run := func(who string, ts int64, r float64) {
		_, err := g.Mutate(context.WithValue(ctx, ctxKey{}, who), Mutation{Op: Update, Label: "rates", Src: "jone", Tgt: "mcd", TS: ts, Props: rating(r)})
		errs[who] <- err
	}
	go run("A", 2, 3)
	<-stalled["A"]
	c.add(2 * time.Second) // A's lock expires
	go run("B", 3, 5)
	<-stalled["B"] // B took the lock over and stalls rolling A forward
	close(release["A"])
	if err := <-errs["A"]; err != nil {
		t.Fatalf("A, taken over before its release: %v (its mutation is applied by whoever holds the lock)", err)
	}
	close(release["B"])
	if err := <-errs["B"]; err != nil {
		t.Fatalf("B: %v", err)
	}
	if got := ratingsOut(t, g, "jone"); len(got) != 1 || got[0] != 5 {
		t.Fatalf("jone's index %v, want [5]", got)
	}
	checkClean(t, New(mem, opts), "rates")
}
