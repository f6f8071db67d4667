package txn

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestActiveSetOldest: the oldest start_ts counts every transaction
// added and not removed as often, across the set's shards, and none
// once all are removed.
func TestActiveSetOldest(t *testing.T) {
	var a activeSet
	if ts, ok := a.oldest(); ok {
		t.Fatalf("empty set: oldest %d", ts)
	}
	// Timestamps in several shards, one added twice (two transactions
	// at one start_ts: a stable start shared).
	for _, ts := range []uint64{100, 7 + 3*activeShards, 7, 7, 50} {
		a.add(ts)
	}
	want := func(what string, ts uint64, ok bool) {
		t.Helper()
		if got, gotOK := a.oldest(); got != ts || gotOK != ok {
			t.Fatalf("%s: oldest = %d, %v; want %d, %v", what, got, gotOK, ts, ok)
		}
	}
	want("all added", 7, true)
	a.remove(7)
	want("one of the two at 7 removed", 7, true)
	a.remove(7)
	want("both at 7 removed", 50, true)
	a.remove(50)
	a.remove(100)
	want("one left, in 7's shard", 7+3*activeShards, true)
	a.remove(7 + 3*activeShards)
	want("all removed", 0, false)
}

// TestActiveSetOldestConcurrent: a transaction active throughout a call
// of oldest is counted by it, while others begin and end in every shard
// around it.
func TestActiveSetOldestConcurrent(t *testing.T) {
	var a activeSet
	const pinned = 1000
	a.add(pinned)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				ts := pinned + 1 + rng.Uint64N(10*activeShards)
				if rng.IntN(4) == 0 {
					ts = 1 + rng.Uint64N(pinned-1) // older than the pinned one, for a moment
				}
				a.add(ts)
				a.remove(ts)
			}
		})
	}
	for range 2000 {
		if ts, ok := a.oldest(); !ok || ts > pinned {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("oldest = %d, %v while %d was active throughout", ts, ok, pinned)
		}
	}
	stop.Store(true)
	wg.Wait()
	a.remove(pinned)
	if ts, ok := a.oldest(); ok {
		t.Fatalf("all ended: oldest %d", ts)
	}
}
