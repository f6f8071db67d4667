package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/workload"
)

// embeddedOracle: timestamps per second from the batching client to 64
// concurrent callers, on a persisted allocator.
func embeddedOracle(ctx context.Context, b *runner, r *Report) error {
	alloc, err := oracle.OpenAllocator(filepath.Join(b.opts.Dir, "oracle-bench"), oracle.AllocatorOptions{})
	if err != nil {
		return err
	}
	defer alloc.Close()
	end := b.timed(ctx, "oracle: seconds measured", b.opts.Duration)
	rate, err := oracle.Throughput(ctx, oracle.NewClient(alloc), 64, b.opts.Duration)
	end(err)
	if err != nil {
		return err
	}
	ts := show(rate, 0)
	r.printf("oracle:  %s timestamps/s to 64 concurrent callers (target >= 2,000,000: %s)", ts, r.mark("oracle >= 2,000,000 timestamps/s", ts.atLeast(2_000_000)))
	return nil
}

// openRawPair opens a raw Pebble store and a DB, each in a directory of
// its own under the scratch directory: the two sides of a figure.
func (b *runner) openRawPair(ctx context.Context, name string) (*cpebble.DB, *percolator.DB, func(), error) {
	raw, err := cpebble.Open(filepath.Join(b.opts.Dir, "raw-"+name), &cpebble.Options{Logger: quietLogger{b.opts.Log}})
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, "txn-"+name)})
	if err != nil {
		_ = raw.Close()
		return nil, nil, nil, err
	}
	return raw, db, func() { _ = db.Close(); _ = raw.Close() }, nil
}

// embeddedWrites compares single-cell write transactions with raw synced
// Pebble writes of the same size at the same concurrency: one-phase
// commits (the default), and two-phase ones (Options.TwoPhaseOnly) on a
// store of their own, in the same alternating run.
func embeddedWrites(ctx context.Context, b *runner, r *Report) error {
	raw, db, closeAll, err := b.openRawPair(ctx, "writes")
	if err != nil {
		return err
	}
	defer closeAll()
	two, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, "txn-writes-2pc"), TwoPhaseOnly: true})
	if err != nil {
		return err
	}
	defer two.Close()
	value := make([]byte, b.opts.ValueSize)
	rawOp := func(rng *rand.Rand) error {
		return raw.Set(benchKey(rng.IntN(1<<30)), value, cpebble.Sync)
	}
	// For scale: the raw writes with a little CPU spent before each, as
	// a layer above them would spend it.
	burning := func(d time.Duration) func(*rand.Rand) error {
		return func(rng *rand.Rand) error {
			burn(d)
			return rawOp(rng)
		}
	}
	end := b.timed(ctx, "writes: seconds measured", 5*b.opts.Duration)
	rates, cpu := alternateAllCPU(ctx, b.opts.Writers, b.opts.Duration, rawOp, writeTxn(ctx, db, benchRow, value), writeTxn(ctx, two, benchRow, value),
		burning(2*time.Microsecond), burning(4*time.Microsecond))
	end(nil)
	rawN, txnN, twoN := rates[0], rates[1], rates[2]
	ratio := show(txnN/rawN, 2)
	r.printf("writes:  %.0f txn/s one-phase, %.0f two-phase vs %.0f raw synced Pebble writes/s at %d writers, %d-byte values: ratio %sx one-phase (target >= 0.8x: %s), %sx two-phase",
		txnN, twoN, rawN, b.opts.Writers, b.opts.ValueSize, ratio, r.mark("writes >= 0.8x raw Pebble", ratio.atLeast(0.8)), show(twoN/rawN, 2))
	// Many writers share each log sync, so a side's rate is bounded by
	// the CPU each write takes more than by the syncs.
	r.printf("         process CPU per write: %s raw, %s one-phase, %s two-phase", cpuPerOp(cpu[0]), cpuPerOp(cpu[1]), cpuPerOp(cpu[2]))
	r.printf("         raw writes with CPU spent before each, for scale: 2 µs more %.0f/s (%sx raw), 4 µs more %.0f/s (%sx raw)",
		rates[3], show(rates[3]/rawN, 2), rates[4], show(rates[4]/rawN, 2))
	return nil
}

// burn keeps the goroutine on the CPU for d.
func burn(d time.Duration) {
	x := uint64(1)
	for start := time.Now(); time.Since(start) < d; {
		for range 32 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	burnSink.Add(x)
}

// burnSink keeps burn's loop from being optimised away.
var burnSink atomic.Uint64

// cpuPerOp formats a CPU time per op in microseconds ("not measured"
// where the platform does not say).
func cpuPerOp(d time.Duration) string {
	if d <= 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

// writeTxn is a transaction setting one cell of a random row of db.
func writeTxn(ctx context.Context, db *percolator.DB, row func(int) string, value []byte) func(*rand.Rand) error {
	return func(rng *rand.Rand) error {
		k := row(rng.IntN(1 << 30))
		return db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(k, "v", value) })
	}
}

func benchRow(i int) string { return string(benchKey(i)) }

// embeddedReads compares read-only transactions of 100 point reads with
// raw Pebble point reads of the same keys.
func embeddedReads(ctx context.Context, b *runner, r *Report) error {
	raw, db, closeAll, err := b.openRawPair(ctx, "reads")
	if err != nil {
		return err
	}
	defer closeAll()
	if err := b.loadReadKeys(ctx, raw, db); err != nil {
		return err
	}
	keys := b.opts.Keys
	rawOp := func(rng *rand.Rand) error {
		for range 100 {
			_, closer, err := raw.Get(benchKey(rng.IntN(keys)))
			if err != nil {
				return err
			}
			_ = closer.Close()
		}
		return nil
	}
	txnOp := func(rng *rand.Rand) error {
		return db.View(ctx, func(tx *percolator.Txn) error {
			for range 100 {
				if _, err := tx.Get(ctx, string(benchKey(rng.IntN(keys))), "v"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	end := b.timed(ctx, "reads: seconds measured", b.opts.Duration)
	rawN, txnN := alternate(ctx, b.opts.Readers, b.opts.Duration, rawOp, txnOp)
	end(nil)
	ratio := show(txnN/rawN, 2)
	r.printf("reads:   %.0f reads/s in read-only txns (100 reads each) vs %.0f raw Pebble reads/s at %d readers: ratio %sx (target >= 0.5x: %s)",
		100*txnN, 100*rawN, b.opts.Readers, ratio, r.mark("reads >= 0.5x raw Pebble", ratio.atLeast(0.5)))
	return nil
}

func (b *runner) loadReadKeys(ctx context.Context, raw *cpebble.DB, db *percolator.DB) error {
	value := make([]byte, b.opts.ValueSize)
	batch := raw.NewBatch()
	for i := range b.opts.Keys {
		_ = batch.Set(benchKey(i), value, nil)
	}
	if err := batch.Commit(cpebble.Sync); err != nil {
		return err
	}
	return loadRows(ctx, db, b.opts.Keys, func(i int) string { return string(benchKey(i)) }, value)
}

// loadRows writes value to column v of n rows, 500 to a transaction.
func loadRows(ctx context.Context, db *percolator.DB, n int, row func(int) string, value []byte) error {
	for i := 0; i < n; i += 500 {
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			for j := i; j < min(i+500, n); j++ {
				if err := tx.Set(row(j), "v", value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// embeddedBank: the bank workload's transfers per second on a durable
// store, its snapshots all checked.
func embeddedBank(ctx context.Context, b *runner, r *Report) error {
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(b.opts.Dir, "bank")})
	if err != nil {
		return err
	}
	defer db.Close()
	end := b.timed(ctx, "bank: seconds measured", b.opts.BankDuration)
	res, err := workload.RunBank(ctx, db, workload.BankOptions{Accounts: 1000, Workers: 64, Readers: 2, Duration: b.opts.BankDuration, Initial: 100})
	end(err)
	if err != nil {
		return err
	}
	r.printf("bank:    %.0f txn/s (1,000 accounts, 64 workers, durable); %d conflicts, %d snapshots, %d wrong (no target; wrong must be 0: %s)",
		res.TxnPerSec(), res.Conflicts, res.Snapshots, res.Wrong, r.mark("bank: no wrong snapshot", res.Wrong == 0))
	if res.Wrong > 0 {
		return fmt.Errorf("%w: %d wrong snapshots", ErrCheck, res.Wrong)
	}
	return nil
}
