package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/oracle"
)

// percolator bench prints the performance figures, each measured
// side by side with its reference in the same run, on the same disk.

type benchConfig struct {
	dir       string
	duration  time.Duration
	writers   int
	readers   int
	keys      int
	valueSize int
	bankDur   time.Duration
	only      string
	profile   string

	log io.Writer // progress lines (stderr)

	notifyCells, notifyDirty, rounds int
	corpus                           string
	indexFiles                       int
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	cfg := benchConfig{log: stderr}
	fs.StringVar(&cfg.dir, "dir", "", "scratch directory (its contents are replaced)")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "time per measurement")
	fs.IntVar(&cfg.writers, "writers", 64, "concurrent writers")
	fs.IntVar(&cfg.readers, "readers", 8, "concurrent readers")
	fs.IntVar(&cfg.keys, "keys", 10000, "keys in the read benchmark")
	fs.IntVar(&cfg.valueSize, "value-size", 100, "value size in bytes")
	fs.DurationVar(&cfg.bankDur, "bank-duration", 5*time.Second, "duration of the bank workload")
	fs.StringVar(&cfg.only, "only", "", "run one figure: oracle, writes, reads, bank, notify or observers")
	fs.IntVar(&cfg.notifyCells, "notify-cells", 1_000_000, "cells of the big table in the notify benchmark")
	fs.IntVar(&cfg.notifyDirty, "notify-dirty", 1000, "dirty cells to find in the notify benchmark (and cells of its small table)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds of the notify benchmark (the median is printed)")
	fs.StringVar(&cfg.corpus, "corpus", "testdata/corpus", "corpus the observers benchmark copies")
	fs.IntVar(&cfg.indexFiles, "index-files", 2000, "files in the observers benchmark's corpus")
	fs.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDir(cfg.dir); err != nil {
		return err
	}
	if cfg.notifyDirty < 1 || cfg.notifyCells < cfg.notifyDirty || cfg.rounds < 1 || cfg.indexFiles < 1 {
		return fmt.Errorf("need 1 <= --notify-dirty <= --notify-cells, --rounds >= 1 and --index-files >= 1")
	}
	steps := []struct {
		name string
		run  func(context.Context, benchConfig, io.Writer) error
	}{{"oracle", benchOracle}, {"writes", benchWrites}, {"reads", benchReads}, {"bank", benchBank}, {"notify", benchNotify}, {"observers", benchObservers}}
	known := cfg.only == ""
	for _, s := range steps {
		known = known || s.name == cfg.only
	}
	if !known {
		return fmt.Errorf("unknown figure %q for --only", cfg.only)
	}
	if err := os.RemoveAll(cfg.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.dir, 0o755); err != nil {
		return err
	}
	if cfg.profile != "" {
		f, err := os.Create(cfg.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, s := range steps {
		if cfg.only == "" || cfg.only == s.name {
			if err := s.run(ctx, cfg, stdout); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	return nil
}

func benchOracle(ctx context.Context, cfg benchConfig, w io.Writer) error {
	alloc, err := oracle.OpenAllocator(filepath.Join(cfg.dir, "oracle-bench"), oracle.AllocatorOptions{})
	if err != nil {
		return err
	}
	defer alloc.Close()
	rate, err := oracle.Throughput(ctx, oracle.NewClient(alloc), 64, cfg.duration)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "oracle:  %.0f timestamps/s to 64 concurrent callers (target >= 2,000,000)\n", rate)
	return nil
}

// benchWrites compares single-cell write transactions with raw synced
// Pebble writes of the same size at the same concurrency, alternating
// rounds so drift on a noisy machine hits both sides alike.
func benchWrites(ctx context.Context, cfg benchConfig, w io.Writer) error {
	raw, err := cpebble.Open(filepath.Join(cfg.dir, "raw-writes"), &cpebble.Options{Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer raw.Close()
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(cfg.dir, "txn-writes")})
	if err != nil {
		return err
	}
	defer db.Close()
	value := make([]byte, cfg.valueSize)
	rawOp := func(rng *rand.Rand) error {
		return raw.Set(benchKey(rng.IntN(1<<30)), value, cpebble.Sync)
	}
	txnOp := func(rng *rand.Rand) error {
		row := string(benchKey(rng.IntN(1 << 30)))
		return db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(row, "v", value) })
	}
	var rawN, txnN float64
	half := cfg.duration / 2
	for range 2 {
		rawN += rate(ctx, cfg.writers, half, rawOp)
		txnN += rate(ctx, cfg.writers, half, txnOp)
	}
	fmt.Fprintf(w, "writes:  %.0f txn/s vs %.0f raw synced Pebble writes/s at %d writers, %d-byte values: ratio %.2fx (target >= 0.25x)\n",
		txnN/2, rawN/2, cfg.writers, cfg.valueSize, txnN/rawN)
	return nil
}

// benchReads compares read-only transactions of 100 point reads with raw
// Pebble point reads of the same keys.
func benchReads(ctx context.Context, cfg benchConfig, w io.Writer) error {
	raw, err := cpebble.Open(filepath.Join(cfg.dir, "raw-reads"), &cpebble.Options{Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer raw.Close()
	db, err := percolator.Open(ctx, percolator.Options{Dir: filepath.Join(cfg.dir, "txn-reads")})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := loadReadKeys(ctx, raw, db, cfg); err != nil {
		return err
	}
	rawOp := func(rng *rand.Rand) error {
		for range 100 {
			v, closer, err := raw.Get(benchKey(rng.IntN(cfg.keys)))
			if err != nil {
				return err
			}
			_ = v
			_ = closer.Close()
		}
		return nil
	}
	txnOp := func(rng *rand.Rand) error {
		return db.View(ctx, func(tx *percolator.Txn) error {
			for range 100 {
				if _, err := tx.Get(ctx, string(benchKey(rng.IntN(cfg.keys))), "v"); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var rawN, txnN float64
	half := cfg.duration / 2
	for range 2 {
		rawN += 100 * rate(ctx, cfg.readers, half, rawOp)
		txnN += 100 * rate(ctx, cfg.readers, half, txnOp)
	}
	fmt.Fprintf(w, "reads:   %.0f reads/s in read-only txns (100 reads each) vs %.0f raw Pebble reads/s at %d readers: ratio %.2fx (target >= 0.5x)\n",
		txnN/2, rawN/2, cfg.readers, txnN/rawN)
	return nil
}

func loadReadKeys(ctx context.Context, raw *cpebble.DB, db *percolator.DB, cfg benchConfig) error {
	value := make([]byte, cfg.valueSize)
	b := raw.NewBatch()
	for i := range cfg.keys {
		_ = b.Set(benchKey(i), value, nil)
	}
	if err := b.Commit(cpebble.Sync); err != nil {
		return err
	}
	for i := 0; i < cfg.keys; i += 500 {
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			for j := i; j < min(i+500, cfg.keys); j++ {
				if err := tx.Set(string(benchKey(j)), "v", value); err != nil {
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

func benchBank(ctx context.Context, cfg benchConfig, w io.Writer) error {
	dir := filepath.Join(cfg.dir, "bank")
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer db.Close()
	bc := bankConfig{dir: dir, accounts: 1000, workers: 64, readers: 2, duration: cfg.bankDur, initial: 100, quiet: true}
	res, err := bank(ctx, db, bc, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "bank:    %.0f txn/s (1,000 accounts, 64 workers, durable); %d conflicts, %d snapshots, %d wrong\n",
		res.txnPerSec(), res.conflicts, res.snapshots, res.bad)
	if res.bad > 0 {
		return fmt.Errorf("%w: %d wrong snapshots", errFailed, res.bad)
	}
	return nil
}

func benchKey(i int) []byte {
	k := make([]byte, 0, 16)
	k = append(k, "key/"...)
	return binary.BigEndian.AppendUint64(k, uint64(i))
}

// rate runs op from n goroutines for d and returns completed ops per second.
func rate(ctx context.Context, n int, d time.Duration, op func(*rand.Rand) error) float64 {
	var done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), uint64(start.UnixNano())))
			for !stop.Load() && ctx.Err() == nil {
				if op(rng) == nil {
					done.Add(1)
				}
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}

// quietLogger drops the raw baseline's informational lines.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)      {}
func (quietLogger) Errorf(f string, a ...any) { fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", a...) }
func (quietLogger) Fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", a...)
	os.Exit(1)
}
