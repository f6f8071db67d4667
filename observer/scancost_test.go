package observer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// scanCost builds a table of `table` cells of an observed column, all
// notified and processed once, then changes `dirty` of them and drains
// again with one scanner: it returns the stored keys the scanners visited
// and the notified rows they found in that second drain.
func scanCost(t *testing.T, st storage.Store, table, dirty, compactAfter int, rng *rand.Rand) (visited, found int64) {
	e := newEnvOn(t, st, Options{})
	ctx := context.Background()
	if err := e.f.Register(ctx, Observer{Name: "o", Column: "c", Fn: func(context.Context, *txn.Txn, string, string) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	row := func(i int) string { return fmt.Sprintf("r%07d", i) }
	for lo := 0; lo < table; lo += 500 {
		e.update(func(tx *txn.Txn) error {
			for i := lo; i < min(lo+500, table); i++ {
				if err := tx.Set(row(i), "c", []byte("v0")); err != nil {
					return err
				}
			}
			return nil
		})
	}
	drain := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		opts := WorkerOptions{Scanners: 1, Drain: true, MaxIdle: 5 * time.Millisecond, CompactAfter: compactAfter}
		if _, err := e.f.Run(ctx, opts); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if n := e.pending(); n != 0 {
			t.Fatalf("%d notifications left after a drain", n)
		}
	}
	drain()
	before, err := e.f.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changed := rng.Perm(table)[:dirty]
	e.update(func(tx *txn.Txn) error {
		for _, i := range changed {
			if err := tx.Set(row(i), "c", []byte("v1")); err != nil {
				return err
			}
		}
		return nil
	})
	drain()
	after, err := e.f.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if runs := after.Observers[0].Counts[statCommits] - before.Observers[0].Counts[statCommits]; runs != int64(dirty) {
		t.Fatalf("%d observer commits for %d changed cells", runs, dirty)
	}
	return after.Scanners[statScanKeys] - before.Scanners[statScanKeys], after.Scanners[statScanRows] - before.Scanners[statScanRows]
}

// TestScanCost: finding dirty cells visits a number of keys proportional
// to the dirty cells, not to the table, also when every clean cell was
// notified and processed before (its cleared notification is compacted
// away rather than rescanned forever). Counted in keys, not timed.
func TestScanCost(t *testing.T) {
	const dirty = 100
	table := 4000
	if testing.Short() {
		table = 1000
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, tc := range []struct {
		name string
		open func(t *testing.T) storage.Store
	}{
		{"memory", func(*testing.T) storage.Store { return memory.New() }},
		{"pebble", func(t *testing.T) storage.Store {
			st, err := pebble.Open(t.TempDir(), pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			// Compacting after dirty/2 clears lets the small table's
			// first round be compacted too: the default (1024) would leave
			// up to that many cleared notifications to every pass.
			small, smallFound := scanCost(t, tc.open(t), dirty, dirty, dirty/2, rng)
			big, bigFound := scanCost(t, tc.open(t), table, dirty, dirty/2, rng)
			t.Logf("finding %d dirty cells: %d keys visited (%d rows found) in a table of %d; %d keys (%d rows) in a table of %d",
				dirty, small, smallFound, dirty, big, bigFound, table)
			// A drain is at least two passes: one finds the dirty cells,
			// the last finds nothing but their fresh tombstones (a
			// notification and its tombstone are two keys).
			if limit := int64(6*dirty + 64); big > limit || small > limit {
				t.Fatalf("keys visited %d (table %d) and %d (table %d): want at most %d for %d dirty cells", big, table, small, dirty, limit, dirty)
			}
			if big > 2*small+64 {
				t.Fatalf("a table %d times larger costs %d keys vs %d", table/dirty, big, small)
			}
		})
	}
	// The measure can fail: without compaction, pebble's scans visit the
	// tombstones of every notification ever cleared.
	t.Run("pebble-uncompacted", func(t *testing.T) {
		st, err := pebble.Open(t.TempDir(), pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		big, _ := scanCost(t, st, table, dirty, -1, rand.New(rand.NewPCG(seed, 2)))
		if big < int64(table) {
			t.Fatalf("without compaction, finding %d dirty cells among %d cleared visited only %d keys", dirty, table, big)
		}
		t.Logf("without compaction: %d keys visited", big)
	})
}
