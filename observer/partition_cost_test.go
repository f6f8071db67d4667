package observer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/txn"
)

// sharedRowsStore is the memory store with scans counted as Cloud
// Bigtable counts them: a scan filtered to one family still reads every
// family of every row it passes, so ScanCounted reports every cell of the
// rows from its start to the row where it stopped. It keeps notifications
// in the data rows (SharedRows is false), so that a pass over the notify
// keyspace costs what a pass over the table does: the cost that
// partitioning divides. (On Bigtable itself notifications live in rows of
// their own, and a pass visits little more than the notifications it
// finds: `percolator bench --bigtable-emulator --only notify`.)
type sharedRowsStore struct {
	*memory.Store
	visited atomic.Int64 // every ScanCounted's count
}

// allFamilies selects every family the protocol and the framework write.
var allFamilies = func() storage.Filter {
	var f storage.Filter
	for _, fam := range []string{txn.FamilyData, txn.FamilyLock, txn.FamilyWrite, txn.FamilyNotify,
		FamilyObservers, FamilyBackfill, FamilyQuarantine, FamilyStats, FamilyPartitions} {
		f = append(f, storage.Selector{Family: fam, AllQualifiers: true})
	}
	return f
}()

func (s *sharedRowsStore) SharedRows() bool { return false }

// ScanCounted implements storage.Counted, Bigtable's way.
func (s *sharedRowsStore) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	var last []byte
	n, stopped := 0, false
	err := s.Store.Scan(ctx, start, end, filter, limit, func(r storage.Row) bool {
		last, n = bytes.Clone(r.Key), n+1
		stopped = !fn(r)
		return !stopped
	})
	if err != nil {
		return 0, err
	}
	stop := end
	if stopped || (limit > 0 && n == limit) {
		stop = append(last, 0) // Bigtable stops at the last row returned
	}
	var cells uint64
	err = s.Store.Scan(ctx, start, stop, allFamilies, 0, func(r storage.Row) bool {
		cells += uint64(len(r.Cells))
		return true
	})
	s.visited.Add(int64(cells))
	return cells, err
}

// costRun is what one measured run of three workers cost.
type costRun struct {
	keys, changes int64
	full, ranged  int64
}

func (r costRun) perChange() float64 { return float64(r.keys) / float64(r.changes) }

// trickleCost runs three workers, partitioned or scanning at random, over
// a table of `table` rows, and measures, after a warm-up, the cells their
// scans visit while `rounds` batches of `batch` changes to random rows are
// written, each processed before the next, with idlePasses passes of
// every worker that find nothing in between (a steady trickle: idle
// workers pass at the pace of their back-off, whatever a pass costs).
func trickleCost(t *testing.T, partitioned bool, table, rounds, batch, idlePasses int, seed uint64) costRun {
	st := &sharedRowsStore{Store: memory.New()}
	c := newCluster(t, st, 3)
	rng := rand.New(rand.NewPCG(seed, 3))
	rows := make([]string, table)
	for i := range rows {
		rows[i] = fmt.Sprintf("r%05d", i)
	}
	for lo := 0; lo < table; lo += 500 {
		c.write("d", rows[lo:min(lo+500, table)]) // the data the scans pass
	}
	pick := func() []string {
		picked := make([]string, batch)
		for i, k := range rng.Perm(table)[:batch] {
			picked[i] = rows[k]
		}
		slices.Sort(picked)
		return picked
	}
	c.write("c", pick()) // the warm-up batch: something to sample
	var runs []*running
	for i := range 3 {
		opts := WorkerOptions{Scanners: 1, MaxIdle: 20 * time.Millisecond}
		if partitioned {
			opts.Membership = c.members[i]
		}
		runs = append(runs, c.start(i, opts))
	}
	if partitioned {
		c.settle([]int{0, 1, 2}, 3)
	}
	waitFor(t, "the warm-up batch is processed", func() bool { return len(c.pending("c")) == 0 })
	passes := func(w *env) (full, ranged int64) { return w.f.fullPasses.Load(), w.f.rangePasses.Load() }
	var full0, ranged0 [3]int64
	for i, w := range c.workers {
		full0[i], ranged0[i] = passes(w)
	}
	keys0 := st.visited.Load()
	for range rounds {
		c.write("c", pick())
		waitFor(t, "a batch is processed", func() bool { return len(c.pending("c")) == 0 })
		for _, w := range c.workers {
			f, r := passes(w)
			waitFor(t, "idle passes", func() bool { f1, r1 := passes(w); return f1+r1 >= f+r+int64(idlePasses) })
		}
	}
	r := costRun{keys: st.visited.Load() - keys0, changes: int64(rounds * batch)}
	for i, w := range c.workers {
		f, rr := passes(w)
		r.full += f - full0[i]
		r.ranged += rr - ranged0[i]
	}
	for i, run := range runs {
		if err := run.stop(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	return r
}

// TestPartitionScanCost: three workers that split the notify keyspace
// visit fewer keys per change they process than three scanning it at
// random, on a store that counts keys as Bigtable does (every cell of
// every row a scan passes). Counted in keys, not timed; the figures are
// logged (README). With FallbackEvery 8, a partitioned worker's
// passes cost about 7/8 × 1/3 + 1/8 ≈ 0.42 of a random scanner's; the
// check asks for less than 0.8, which scanning the whole keyspace on
// every pass does not meet.
func TestPartitionScanCost(t *testing.T) {
	table, rounds := 2000, 8
	if testing.Short() {
		table, rounds = 1000, 4
	}
	const batch = 20
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	random := trickleCost(t, false, table, rounds, batch, 2, seed)
	parts := trickleCost(t, true, table, rounds, batch, 2, seed)
	for _, x := range []struct {
		name string
		r    costRun
	}{{"random scanning", random}, {"partitioned", parts}} {
		t.Logf("%s: %d keys visited for %d changes (%.0f per change; %d passes over the whole keyspace, %d over a range)",
			x.name, x.r.keys, x.r.changes, x.r.perChange(), x.r.full, x.r.ranged)
	}
	t.Logf("partitioned / random: %.2f (table of %d rows, 3 workers)", parts.perChange()/random.perChange(), table)
	if parts.perChange() >= 0.8*random.perChange() {
		t.Fatalf("partitioned workers visit %.0f keys per change, random scanners %.0f", parts.perChange(), random.perChange())
	}
}
