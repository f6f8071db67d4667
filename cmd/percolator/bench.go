package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/seed-992972ee/percolator/bench"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// benchConfig is what `bench` was asked for: the options of the figures
// (package bench) and what the command does around them.
type benchConfig struct {
	opts      bench.Options
	dir, only string
	profile   string
	tg        cli.Target // --server, --token-file, --tls-ca
	jsonOut   bool
}

// benchCmd is `bench`: the performance figures (package bench), each
// beside its reference and marked against its target, printed as each
// ends.
func benchCmd() *cobra.Command {
	var cfg benchConfig
	c := &cobra.Command{
		Use:   "bench",
		Short: "the performance figures, each against its target",
		Long: `Measure the performance figures, each beside its reference in the same run
and marked against its target (met or MISSED): by default the embedded
ones in a scratch directory; with --server a server's (and with --postgres
the server beside PostgreSQL on the same bank); with --bigtable or
--bigtable-emulator the Bigtable ones.

A verdict compares the value as printed, rounded: a printed 0.25x meets a
target of >= 0.25x. Exit status: 0 when every target is met, 1 when any
is MISSED (the error names them) or a figure fails, 2 on a usage error.`,
		Example: `  percolator bench --only writes --duration 5s
  percolator bench --only gc --gc-duration 1m
  percolator bench --only rivals --bank-duration 2s
  percolator bench --server 127.0.0.1:7420 --only oracle
  percolator bench --server 127.0.0.1:7420 --postgres 'postgres://bench@127.0.0.1:5432/bench?sslmode=disable' --only postgres
  percolator bench --bigtable-emulator --only rpcs`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runBench(c.Context(), &cfg, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	cfg.register(c.Flags())
	return c
}

// register adds bench's flags to fs.
func (cfg *benchConfig) register(fs *pflag.FlagSet) {
	o := &cfg.opts
	fs.StringVar(&cfg.dir, "dir", "", "scratch directory: a new or empty one, or one an earlier bench made (its contents are replaced); default a temporary directory, removed at the end")
	fs.DurationVar(&o.Duration, "duration", 3*time.Second, "time per measurement")
	fs.IntVar(&o.Writers, "writers", 64, "concurrent writers")
	fs.IntVar(&o.Readers, "readers", 8, "concurrent readers")
	fs.IntVar(&o.Keys, "keys", 10000, "keys in the read benchmark")
	fs.IntVar(&o.ValueSize, "value-size", 100, "value size in bytes")
	fs.DurationVar(&o.BankDuration, "bank-duration", 5*time.Second, "duration of the bank workload, and of each turn of each side of the rivals figure (percolator, badger, bbolt, etcd; 2 turns each)")
	fs.DurationVar(&o.GCDuration, "gc-duration", 10*time.Minute, "duration of the gc figure's bank run on two stores, with and without the garbage collector (sampled at 1/5 of it and at its end)")
	fs.DurationVar(&o.GCLifetime, "gc-lifetime", 30*time.Second, "the gc figure's collector lifetime (at most --gc-duration/5)")
	fs.IntVar(&o.GCVersions, "gc-versions", 1000, "versions of each of the gc figure's 1,000 accounts before the collection whose scans it times")
	fs.StringVar(&cfg.only, "only", "", "run one figure: "+strings.Join(bench.Figures(bench.Embedded), ", ")+"; with --server: "+strings.Join(bench.Figures(bench.Server), ", ")+
		"; with --bigtable or --bigtable-emulator: "+strings.Join(bench.Figures(bench.Bigtable), ", "))
	fs.IntVar(&o.NotifyCells, "notify-cells", 1_000_000, "cells of the big table in the notify benchmark")
	fs.IntVar(&o.NotifyDirty, "notify-dirty", 1000, "dirty cells to find in the notify benchmark (and cells of its small table)")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds of the notify benchmark (the median is printed)")
	fs.StringVar(&o.Corpus, "corpus", "", "corpus of the observers and rerun figures (default testdata/corpus, copied to --index-files files; a named corpus is copied as is for rerun)")
	fs.IntVar(&o.IndexFiles, "index-files", 2000, "files in the observers figure's corpus (and rerun's, from the default corpus)")
	fs.Float64Var(&o.EditFraction, "edit-fraction", 0.01, "fraction of the files the rerun figure edits")
	fs.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print every figure's lines and targets as JSON once the run ends")
	fs.BoolVar(&o.BigtableEmulator, "bigtable-emulator", false, "measure the Bigtable figures (RPCs per transaction, reads and writes beside raw Bigtable calls, notifications, garbage collection) on a Bigtable emulator started in this process")
	fs.StringVar(&o.Bigtable, "bigtable", "", "measure the Bigtable figures on this table, PROJECT/INSTANCE/TABLE (created if needed; BIGTABLE_EMULATOR_HOST is honoured)")
	fs.StringVar(&cfg.tg.Server, "server", "", "measure the server figures against the percolator server at this address (its oracle, reads, writes and nonces, each beside raw RPCs; with --postgres, the server beside PostgreSQL; the gc figure starts servers of its own)")
	fs.StringVar(&o.Postgres, "postgres", "", "with --server: also measure the server against the PostgreSQL server at this libpq URL (postgres://USER@HOST:PORT/DATABASE?sslmode=disable) on the same bank, alternating turns of --bank-duration: transfers/s at 64 and 16 workers, latency, audits, point reads and the server's RPCs per transfer (the postgres figure; it creates and drops the table percolator_bench_accounts, and needs synchronous_commit and fsync on; without this flag that figure is skipped)")
	fs.BoolVar(&o.AsyncCommit, "async-commit", false, "with --postgres: the server's side commits its transfers asynchronously (one call each, its records in the background; see percolator help serve)")
	fs.StringVar(&cfg.tg.TokenFile, "token-file", "", "with --server: file holding the server's token (default: $PERCOLATOR_TOKEN)")
	fs.StringVar(&cfg.tg.TLSCA, "tls-ca", "", "with --server: CA certificate of the server's TLS")
}

// runBench checks the flags, prepares the scratch directory and runs
// the figures.
func runBench(ctx context.Context, cfg *benchConfig, stdout, stderr io.Writer) error {
	// The figures' log lines go out under the meter's lock: its
	// heartbeat writes to stderr from a goroutine of its own.
	meter := progress.New(ctx, stderr, false)
	cfg.opts.Log, cfg.opts.Progress, cfg.opts.Command = meter.Writer(), meter, cli.CommandSelf
	if err := cfg.validate(); err != nil {
		return err
	}
	dir, cleanup, err := bench.PrepareDir(cfg.dir)
	if errors.Is(err, bench.ErrNotScratch) {
		return cli.Usagef("--dir %s is not empty and was not made by bench: give a new or empty directory (bench never deletes what it did not create)", cfg.dir)
	}
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.opts.Dir = dir
	fmt.Fprintf(stderr, "bench: scratch directory %s\n", dir)
	return cfg.run(ctx, stdout)
}

// validate checks the flags, reads the server's token, and finds the
// corpus if a chosen figure reads it.
func (cfg *benchConfig) validate() error {
	o := &cfg.opts
	o.Server = bench.ServerTarget{Addr: cfg.tg.Server, TokenFile: cfg.tg.TokenFile, CAFile: cfg.tg.TLSCA}
	switch {
	case o.NotifyDirty < 1 || o.NotifyCells < o.NotifyDirty || o.Rounds < 1 || o.IndexFiles < 1:
		return cli.Usagef("need 1 <= --notify-dirty <= --notify-cells, --rounds >= 1 and --index-files >= 1")
	case o.Duration <= 0 || o.BankDuration <= 0 || o.Writers < 1 || o.Readers < 1 || o.Keys < 1 || o.ValueSize < 0:
		return cli.Usagef("need --duration, --bank-duration > 0, --writers, --readers, --keys >= 1 and --value-size >= 0")
	case o.GCDuration <= 0 || o.GCLifetime <= 0 || o.GCVersions < 2:
		return cli.Usagef("need --gc-duration, --gc-lifetime > 0 and --gc-versions >= 2")
	case o.EditFraction <= 0 || o.EditFraction > 1:
		return cli.Usagef("--edit-fraction must be in (0, 1]")
	case o.Server.Addr != "" && (o.BigtableEmulator || o.Bigtable != ""), o.BigtableEmulator && o.Bigtable != "":
		return cli.Usagef("--server, --bigtable and --bigtable-emulator exclude each other")
	case o.Postgres != "" && o.Server.Addr == "":
		return cli.Usagef("--postgres needs --server (the server it measures against PostgreSQL)")
	case o.Postgres != "" && bench.CheckPostgresURL(o.Postgres) != nil:
		return cli.Usagef("--postgres: %v", bench.CheckPostgresURL(o.Postgres))
	}
	if o.Bigtable != "" {
		var bt bigtable.Options
		if err := bt.ParseTable(o.Bigtable); err != nil {
			return cli.Usagef("--bigtable: %v", err)
		}
	}
	if err := o.Validate(); err != nil {
		return cli.Usagef("%v", err) // what the checks above missed, in the options' words
	}
	suite := o.Suite()
	if cfg.only != "" && !slices.Contains(bench.Figures(suite), cfg.only) {
		return cli.Usagef("unknown figure %q for --only (want one of %s)", cfg.only, strings.Join(bench.Figures(suite), ", "))
	}
	if o.Server.Addr != "" {
		tok, err := cli.ReadToken(cfg.tg.TokenFile)
		if err != nil {
			return err
		}
		o.Server.Token = tok
	}
	if !bench.NeedsCorpus(suite, cfg.figures()) {
		return nil
	}
	return cfg.findCorpus()
}

// figures are the figures to run: --only's, or the suite's.
func (cfg *benchConfig) figures() []string {
	if cfg.only != "" {
		return []string{cfg.only}
	}
	return bench.Figures(cfg.opts.Suite())
}

// findCorpus checks --corpus (then copied as is for rerun), or finds
// testdata/corpus from the working directory up, or next to this source
// file (go run from anywhere).
func (cfg *benchConfig) findCorpus() error {
	o := &cfg.opts
	if o.Corpus != "" {
		o.CorpusAsIs = true
		if fi, err := os.Stat(o.Corpus); err != nil || !fi.IsDir() {
			return cli.Usagef("--corpus %s: not a directory", o.Corpus)
		}
		return nil
	}
	c, err := cli.FindTestdata("corpus")
	if err != nil {
		return cli.Usagef("cannot find testdata/corpus from here: give --corpus DIR")
	}
	if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
		return cli.Usagef("testdata/corpus is not a directory: give --corpus DIR")
	}
	o.Corpus = c
	return nil
}

// run runs the figures, printing each one's lines as it ends, then the
// targets met and missed (verdict).
func (cfg *benchConfig) run(ctx context.Context, stdout io.Writer) error {
	stopProfile, err := startCPUProfile(cfg.profile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var targets []bench.Target
	var reports []bench.Report
	err = bench.Run(ctx, cfg.opts, cfg.figures(), func(r bench.Report) {
		if cfg.jsonOut {
			reports = append(reports, r) // printed once the run ends
		} else {
			for _, l := range r.Lines {
				fmt.Fprintln(stdout, l)
			}
		}
		targets = append(targets, r.Targets...)
	})
	if err != nil {
		return err
	}
	if cfg.jsonOut {
		if err := view.BenchReports(stdout, reports); err != nil {
			return err
		}
		return missedOf(targets)
	}
	return verdict(stdout, targets)
}

// verdict prints how many targets were met and missed, and returns
// missedTargets (exit 1) if any was missed.
func verdict(stdout io.Writer, targets []bench.Target) error {
	err := missedOf(targets)
	var missed missedTargets
	errors.As(err, &missed)
	fmt.Fprintf(stdout, "targets: %d met, %d missed\n", len(targets)-len(missed), len(missed))
	return err
}

// missedOf is missedTargets of the targets missed, nil if none was.
func missedOf(targets []bench.Target) error {
	var missed missedTargets
	for _, t := range targets {
		if !t.Met {
			missed = append(missed, t.Name)
		}
	}
	if len(missed) > 0 {
		return missed
	}
	return nil
}

// missedTargets names the targets a run missed: a failed check
// (cli.ErrFailed, exit 1), whose message is the names alone.
type missedTargets []string

func (m missedTargets) Error() string {
	noun := "targets"
	if len(m) == 1 {
		noun = "target"
	}
	return fmt.Sprintf("%d %s missed: %s", len(m), noun, strings.Join(m, "; ")) // names hold commas
}

func (missedTargets) Unwrap() error { return cli.ErrFailed }

// startCPUProfile writes a CPU profile of the process to path until the
// function it returns is called (--cpuprofile, a developer's flag of
// bench and serve); "" profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
