package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/workload"
)

// percolator bench prints the performance figures, each measured
// side by side with its reference in the same run, on the same disk, and
// marked against its target.

type benchConfig struct {
	dir       string
	tg        target // --server: the server figures instead
	duration  time.Duration
	writers   int
	readers   int
	keys      int
	valueSize int
	bankDur   time.Duration
	only      string
	profile   string

	btEmulator bool             // --bigtable-emulator: the Bigtable figures on an in-process emulator
	btTable    string           // --bigtable P/I/T: the Bigtable figures on a real table
	btOpts     bigtable.Options // parsed from them

	log     io.Writer    // progress lines (stderr)
	targets *targetTally // each figure's mark against its target

	notifyCells, notifyDirty, rounds int
	corpus                           string
	corpusGiven                      bool // --corpus named: copy it as is
	indexFiles                       int
	editFraction                     float64
}

// benchStep is one figure.
type benchStep struct {
	name string
	run  func(context.Context, benchConfig, io.Writer) error
	// corpus: the figure reads the corpus.
	corpus bool
}

var benchSteps = []benchStep{
	{"oracle", benchOracle, false}, {"writes", benchWrites, false}, {"reads", benchReads, false}, {"bank", benchBank, false},
	{"notify", benchNotify, false}, {"observers", benchObservers, true}, {"rerun", benchRerun, true},
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stderr)
	cfg := benchConfig{log: stderr, targets: &targetTally{}}
	fs.StringVar(&cfg.dir, "dir", "", "scratch directory: a new or empty one, or one an earlier bench made (its contents are replaced); default a temporary directory, removed at the end")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "time per measurement")
	fs.IntVar(&cfg.writers, "writers", 64, "concurrent writers")
	fs.IntVar(&cfg.readers, "readers", 8, "concurrent readers")
	fs.IntVar(&cfg.keys, "keys", 10000, "keys in the read benchmark")
	fs.IntVar(&cfg.valueSize, "value-size", 100, "value size in bytes")
	fs.DurationVar(&cfg.bankDur, "bank-duration", 5*time.Second, "duration of the bank workload")
	fs.StringVar(&cfg.only, "only", "", "run one figure: "+stepNames(benchSteps)+"; with --server: "+stepNames(serverSteps))
	fs.IntVar(&cfg.notifyCells, "notify-cells", 1_000_000, "cells of the big table in the notify benchmark")
	fs.IntVar(&cfg.notifyDirty, "notify-dirty", 1000, "dirty cells to find in the notify benchmark (and cells of its small table)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds of the notify benchmark (the median is printed)")
	fs.StringVar(&cfg.corpus, "corpus", "", "corpus of the observers and rerun figures (default testdata/corpus, copied to --index-files files; a named corpus is copied as is for rerun)")
	fs.IntVar(&cfg.indexFiles, "index-files", 2000, "files in the observers figure's corpus (and rerun's, from the default corpus)")
	fs.Float64Var(&cfg.editFraction, "edit-fraction", 0.01, "fraction of the files the rerun figure edits")
	fs.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&cfg.btEmulator, "bigtable-emulator", false, "measure the Bigtable figures (RPCs per transaction, reads and writes beside raw Bigtable calls) on a Bigtable emulator started in this process")
	fs.StringVar(&cfg.btTable, "bigtable", "", "measure the Bigtable figures on this table, PROJECT/INSTANCE/TABLE (created if needed; BIGTABLE_EMULATOR_HOST is honoured)")
	fs.StringVar(&cfg.tg.server, "server", "", "measure the server figures against the percolator server at this address (its oracle, reads, writes and nonces, each beside raw RPCs)")
	fs.StringVar(&cfg.tg.tokenFile, "token-file", "", "with --server: file holding the server's token (default: $PERCOLATOR_TOKEN)")
	fs.StringVar(&cfg.tg.tlsCA, "tls-ca", "", "with --server: CA certificate of the server's TLS")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	steps, err := cfg.validate(fs.Args())
	if err != nil {
		return err
	}
	dir, cleanup, err := benchDir(cfg.dir)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.dir = dir
	fmt.Fprintf(stderr, "bench: scratch directory %s\n", dir)
	return cfg.runSteps(ctx, steps, stdout)
}

func stepNames(steps []benchStep) string {
	var names []string
	for _, s := range steps {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

// validate checks the flags, finds the corpus if a chosen figure needs
// it, and returns the figures to run.
func (cfg *benchConfig) validate(rest []string) ([]benchStep, error) {
	switch {
	case len(rest) > 0:
		return nil, usagef("unexpected arguments %q", rest)
	case cfg.notifyDirty < 1 || cfg.notifyCells < cfg.notifyDirty || cfg.rounds < 1 || cfg.indexFiles < 1:
		return nil, usagef("need 1 <= --notify-dirty <= --notify-cells, --rounds >= 1 and --index-files >= 1")
	case cfg.duration <= 0 || cfg.bankDur <= 0 || cfg.writers < 1 || cfg.readers < 1 || cfg.keys < 1 || cfg.valueSize < 0:
		return nil, usagef("need --duration, --bank-duration > 0, --writers, --readers, --keys >= 1 and --value-size >= 0")
	case cfg.editFraction <= 0 || cfg.editFraction > 1:
		return nil, usagef("--edit-fraction must be in (0, 1]")
	}
	var steps []benchStep
	needCorpus := false
	all := benchSteps
	switch {
	case (cfg.tg.server != "") && (cfg.btEmulator || cfg.btTable != ""), cfg.btEmulator && cfg.btTable != "":
		return nil, usagef("--server, --bigtable and --bigtable-emulator exclude each other")
	case cfg.tg.server != "":
		all = serverSteps
	case cfg.btTable != "":
		if err := cfg.btOpts.ParseTable(cfg.btTable); err != nil {
			return nil, usagef("--bigtable: %v", err)
		}
		all = bigtableSteps
	case cfg.btEmulator:
		_ = cfg.btOpts.ParseTable("bench/bench/percolator")
		all = bigtableSteps
	}
	for _, s := range all {
		if cfg.only == "" || cfg.only == s.name {
			steps = append(steps, s)
			needCorpus = needCorpus || s.corpus
		}
	}
	if len(steps) == 0 {
		return nil, usagef("unknown figure %q for --only (want one of %s)", cfg.only, stepNames(all))
	}
	if needCorpus {
		return steps, cfg.findCorpus()
	}
	return steps, nil
}

// findCorpus checks --corpus, or finds testdata/corpus from the working
// directory up, or next to this source file (go run from anywhere).
func (cfg *benchConfig) findCorpus() error {
	if cfg.corpus != "" {
		cfg.corpusGiven = true
		if fi, err := os.Stat(cfg.corpus); err != nil || !fi.IsDir() {
			return usagef("--corpus %s: not a directory", cfg.corpus)
		}
		return nil
	}
	c, err := findTestdata("corpus")
	if err != nil {
		return usagef("cannot find testdata/corpus from here: give --corpus DIR")
	}
	if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
		return usagef("testdata/corpus is not a directory: give --corpus DIR")
	}
	cfg.corpus = c
	return nil
}

func (cfg benchConfig) runSteps(ctx context.Context, steps []benchStep, stdout io.Writer) error {
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
		if err := s.run(ctx, cfg, stdout); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	fmt.Fprintf(stdout, "targets: %s\n", cfg.targets)
	return nil
}

// benchMarker is the file that marks a directory bench made: bench
// deletes the contents of such a directory, and of no other.
const benchMarker = ".percolator-bench"

// benchDir prepares the scratch directory: a new temporary one (removed
// by cleanup) if dir is "", else dir if it is new, empty, or made by an
// earlier bench (its contents then deleted). Any other directory is
// refused: bench never deletes what it did not create.
func benchDir(dir string) (string, func(), error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "percolator-bench-")
		if err != nil {
			return "", nil, err
		}
		return tmp, func() { _ = os.RemoveAll(tmp) }, nil
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = os.MkdirAll(dir, 0o755)
	case err != nil:
		return "", nil, err
	case len(entries) == 0:
	case hasMarker(entries):
		err = clearDir(dir, entries)
	default:
		return "", nil, usagef("--dir %s is not empty and was not made by bench: give a new or empty directory (bench never deletes what it did not create)", dir)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, benchMarker), []byte("made by percolator bench; its contents are replaced by the next bench\n"), 0o644)
	}
	return dir, func() {}, err
}

func hasMarker(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.Name() == benchMarker && e.Type().IsRegular() {
			return true
		}
	}
	return false
}

// clearDir deletes the entries of a directory bench made.
func clearDir(dir string, entries []os.DirEntry) error {
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// targetTally counts the figures that met and missed their targets.
// Figures run one at a time, so it needs no lock.
type targetTally struct{ met, missed int }

// mark returns "met" or "MISSED" for a figure and counts it.
func (t *targetTally) mark(ok bool) string {
	if ok {
		t.met++
		return "met"
	}
	t.missed++
	return "MISSED"
}

func (t *targetTally) String() string {
	return fmt.Sprintf("%d met, %d missed", t.met, t.missed)
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
	fmt.Fprintf(w, "oracle:  %.0f timestamps/s to 64 concurrent callers (target >= 2,000,000: %s)\n", rate, cfg.targets.mark(rate >= 2_000_000))
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
	fmt.Fprintf(w, "writes:  %.0f txn/s vs %.0f raw synced Pebble writes/s at %d writers, %d-byte values: ratio %.2fx (target >= 0.25x: %s)\n",
		txnN/2, rawN/2, cfg.writers, cfg.valueSize, txnN/rawN, cfg.targets.mark(txnN/rawN >= 0.25))
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
	fmt.Fprintf(w, "reads:   %.0f reads/s in read-only txns (100 reads each) vs %.0f raw Pebble reads/s at %d readers: ratio %.2fx (target >= 0.5x: %s)\n",
		txnN/2, rawN/2, cfg.readers, txnN/rawN, cfg.targets.mark(txnN/rawN >= 0.5))
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
	res, err := workload.RunBank(ctx, db, workload.BankOptions{Accounts: 1000, Workers: 64, Readers: 2, Duration: cfg.bankDur, Initial: 100})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "bank:    %.0f txn/s (1,000 accounts, 64 workers, durable); %d conflicts, %d snapshots, %d wrong (no target; wrong must be 0: %s)\n",
		res.TxnPerSec(), res.Conflicts, res.Snapshots, res.Wrong, cfg.targets.mark(res.Wrong == 0))
	if res.Wrong > 0 {
		return fmt.Errorf("%w: %d wrong snapshots", errFailed, res.Wrong)
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
