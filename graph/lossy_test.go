package graph

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// lossyOpts are the faults the lossy histories run under: writes fail
// before they apply or lose their reply, calls without a nonce arrive
// again late, reads fail.
func lossyOpts(seed uint64) storagetest.LossyOptions {
	return storagetest.LossyOptions{Seed: seed, FailBefore: 0.04, LoseReply: 0.04, Duplicate: 0.1, ReadFail: 0.03}
}

// Mutations per worker of the lossy histories: a few seconds each by
// default; TestFaultSuiteGraphLossy runs them longer.
const (
	lossyPer      = 60
	lossyPerFault = 400
)

// TestFaultSuiteGraphLossy (PERCOLATOR_FAULT_SUITE=1) runs the lossy
// histories below with lossyPerFault mutations per worker.
func TestFaultSuiteGraphLossy(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") != "1" {
		t.Skip("a fault soak: set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	t.Run("strong", func(t *testing.T) { lossyHistoryStrong(t, lossyPerFault) })
	t.Run("weak", func(t *testing.T) { weakLossyHistory(t, lossyPerFault) })
	t.Run("txn", func(t *testing.T) { txnLossyHistory(t, lossyPerFault) })
}

// TestLossyHistoryStrong: the random history of a strong label over a
// Lossy store (its CheckAndMutates fail or lose their replies; they carry
// a nonce over a server and Bigtable never re-sends them, so they are not
// duplicated). Check passes and every edge is the fold of the mutations
// applied.
func TestLossyHistoryStrong(t *testing.T) { lossyHistoryStrong(t, lossyPer) }

func lossyHistoryStrong(t *testing.T, per int) {
	s := seed(t)
	mem := memory.New()
	defer mem.Close()
	st, lossy := storagetest.NewLossy(mem, lossyOpts(s))
	opts := Options{MaxBackOff: 2 * time.Millisecond, MaxRetries: 4, LockExpiry: 30 * time.Millisecond}
	if err := New(mem, opts).CreateLabel(ctx, rates); err != nil {
		t.Fatal(err)
	}
	applied := graphHistory{edges: 3, workers: 6, per: per, increments: true}.run(t, New(st, opts), s)
	lossy.SetEnabled(false)
	lossy.Flush()
	t.Logf("faults: %+v", lossy.Stats())
	clean := New(mem, Options{})
	if rep := checkClean(t, clean, "rates"); rep.Locked != 0 {
		t.Fatalf("%d edges still locked after every mutation returned", rep.Locked)
	}
	checkFold(t, clean, applied)
}

// TestWeakLossyHistory: a weak label over a Lossy store whose batches
// arrive again late, one writer per edge (the races weak labels allow
// need two). What the doc promises: every index edge matches its snapshot
// whatever the faults, and every snapshot is the fold of the mutations
// applied; only the degrees may be off.
func TestWeakLossyHistory(t *testing.T) { weakLossyHistory(t, lossyPer) }

func weakLossyHistory(t *testing.T, per int) {
	s := seed(t)
	mem := memory.New()
	defer mem.Close()
	st, lossy := storagetest.NewLossy(mem, lossyOpts(s))
	l := rates
	l.Consistency = Weak
	if err := New(mem, Options{}).CreateLabel(ctx, l); err != nil {
		t.Fatal(err)
	}
	applied := graphHistory{edges: 2, workers: 4, per: per, own: true}.run(t, New(st, Options{}), s)
	lossy.SetEnabled(false)
	lossy.Flush()
	stats := lossy.Stats()
	t.Logf("faults: %+v", stats)
	if stats.Duplicated == 0 {
		t.Fatal("no batch was duplicated: the history tests nothing")
	}
	clean := New(mem, Options{})
	rep, err := clean.Check(ctx, "rates")
	if err != nil {
		t.Fatal(err)
	}
	degrees := 0
	for _, m := range rep.Mismatches {
		if strings.HasPrefix(m, "degree row ") {
			degrees++
			continue
		}
		t.Errorf("check: %s", m)
	}
	t.Logf("%d degree rows off (weak degrees are plain Increments)", degrees)
	checkFold(t, clean, applied)
}

// TestTxnLossyHistory: a txn label on a DB whose store is Lossy (its
// prewrites, commits and secondary commits are sent without a nonce and
// arrive again late). Check passes in one snapshot, and every edge is the
// fold of the mutations applied.
func TestTxnLossyHistory(t *testing.T) { txnLossyHistory(t, lossyPer) }

func txnLossyHistory(t *testing.T, per int) {
	s := seed(t)
	mem := memory.New()
	defer mem.Close()
	// Shared (no index, no deferred writes: as on Bigtable or a server),
	// so the protocol's calls go through the variants without a nonce.
	st, lossy := storagetest.NewLossy(storagetest.SharedStore{Store: mem}, lossyOpts(s))
	lossy.SetEnabled(false) // while the DB opens
	db, err := percolator.Open(ctx, percolator.Options{Store: st, Oracle: &counterOracle{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g := New(db.Store(), Options{DB: db})
	l := rates
	l.Consistency = Txn
	if err := g.CreateLabel(ctx, l); err != nil {
		t.Fatal(err)
	}
	lossy.SetEnabled(true)
	applied := graphHistory{edges: 3, workers: 4, per: per, increments: true}.run(t, g, s)
	lossy.SetEnabled(false)
	lossy.Flush()
	t.Logf("faults: %+v", lossy.Stats())
	checkClean(t, g, "rates")
	checkFold(t, g, applied)
}

// counterOracle hands out 1, 2, 3, ...
type counterOracle struct{ n atomic.Uint64 }

func (o *counterOracle) Timestamp(context.Context) (uint64, error) { return o.n.Add(1), nil }
