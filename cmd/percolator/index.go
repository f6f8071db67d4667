package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/docindex"
)

// indexConfig is what `index` was asked for.
type indexConfig struct {
	tg             target
	job            docindex.JobOptions
	dups           bool
	quiet, jsonOut bool
	strict         bool
	argv           []string // the command line, for the status file
}

// maxBadShown bounds the bad files the summary lists.
const maxBadShown = 20

// indexCmd is `index`: the main job (docindex.RunJob), which keeps an
// index of a directory of text and HTML files current through a chain of
// observers; --dups lists the duplicate clusters, and its one
// sub-command, query, the documents with a word. A source directory
// named query is given as ./query or after "--". argv is the command
// line, which the status file names.
func indexCmd(argv []string) *cobra.Command {
	cfg := indexConfig{argv: argv}
	c := &cobra.Command{
		Use:   "index SRC_DIR",
		Short: "the main job: keep an index of a directory current with observers",
		Long: `Load what changed in SRC_DIR (text, Markdown and HTML files), run the
index's observers to quiescence and count; --verify compares the index
with a from-scratch batch build. With --dups, list the duplicate clusters
instead; 'index query WORD' lists the documents with WORD.

A source directory named query is written ./query, or after "--" (every
argument after "--" is a directory): percolator index --dir D -- query.`,
		Example: `  percolator index --dir D --verify ~/docs
  percolator index --dir D query closure
  percolator index --dir D --json --dups
  percolator index --server 127.0.0.1:7420 -- query`,
		Args: cobra.ArbitraryArgs, // checked with --dups in RunE
		RunE: func(c *cobra.Command, args []string) error {
			return runIndex(c.Context(), &cfg, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	pfs, fs := c.PersistentFlags(), c.Flags()
	cfg.tg.register(pfs, "database directory (created if needed)")
	pfs.BoolVar(&cfg.jsonOut, "json", false, "print the summary, query results or clusters as JSON")
	fs.IntVar(&cfg.job.Scanners, "scanners", 4, "scanner threads running the observers")
	fs.IntVar(&cfg.job.Loaders, "loaders", 8, "concurrent loader transactions")
	fs.Int64Var(&cfg.job.MaxFileSize, "max-file-size", docindex.DefaultMaxFileSize, "largest file to index, in bytes; larger ones are skipped as bad")
	fs.BoolVar(&cfg.job.Verify, "verify", false, "check the index against a from-scratch batch build of SRC_DIR")
	fs.BoolVar(&cfg.dups, "dups", false, "list the duplicate clusters")
	fs.BoolVar(&cfg.quiet, "quiet", false, "no progress")
	fs.BoolVar(&cfg.strict, "strict", false, "exit 1 if any file was skipped as bad (they are reported either way)")
	fs.BoolVar(&cfg.job.Rehash, "rehash", false, "read and compare every file, even those whose size, mtime and inode are unchanged")
	fs.BoolVar(&cfg.job.AllowDeletes, "allow-deletes", false, "allow deleting more than half of the indexed documents in one run")
	c.AddCommand(indexQueryCmd(&cfg.tg, &cfg.jsonOut))
	return c
}

// runIndex runs the job on SRC_DIR, or lists the duplicates with --dups.
func runIndex(ctx context.Context, cfg *indexConfig, args []string, stdout, stderr io.Writer) error {
	switch {
	case cfg.dups && len(args) > 0:
		return usagef("--dups takes no SRC_DIR, got %q", args)
	case !cfg.dups && len(args) != 1:
		return usagef("want one SRC_DIR (or query WORD, or --dups), got %q", args)
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.dups {
		return withDB(ctx, &cfg.tg, func(db *percolator.DB) error { return printDups(ctx, db, cfg.jsonOut, stdout) })
	}
	cfg.job.Src = args[0]
	if fi, err := os.Stat(cfg.job.Src); err != nil || !fi.IsDir() {
		return usagef("SRC_DIR %s is not a directory", cfg.job.Src)
	}
	return indexDir(ctx, *cfg, stdout, stderr)
}

func (cfg *indexConfig) validate() error {
	switch {
	case cfg.job.Scanners < 1 || cfg.job.Loaders < 1:
		return usagef("--scanners and --loaders must be at least 1")
	case cfg.job.MaxFileSize < 1:
		return usagef("--max-file-size must be at least 1")
	}
	return cfg.tg.validate()
}

// indexSummary is what an index run did, as --json prints it: the job's
// summary, with the bad files' paths as paths print and the time it took
// to open the database.
type indexSummary struct {
	docindex.JobSummary
	Bad      []runstatus.Bad `json:"bad_files"`
	OpenTime time.Duration   `json:"open_ns"`
}

// indexDir is the index job (docindex.RunJob) on the target's database.
// It publishes its status in its directory (an embedded store's) while it
// runs, and prints a summary line per phase, or the summary as JSON.
func indexDir(ctx context.Context, cfg indexConfig, stdout, stderr io.Writer) (err error) {
	start := time.Now()
	db, err := cfg.tg.open(ctx, true)
	if err != nil {
		return err
	}
	pub := runstatus.Start(cfg.tg.publishDir(), cfg.argv)
	defer func() {
		pub.Finish(err)
		err = errors.Join(err, db.Close())
	}()
	rep := &indexReport{tg: &cfg.tg, pub: pub, prog: progress.New(stderr, cfg.quiet), out: stdout, jsonOut: cfg.jsonOut}
	cfg.job.Report = rep
	sum := indexSummary{OpenTime: time.Since(start)}
	sum.JobSummary, err = docindex.RunJob(ctx, db, cfg.job)
	switch {
	case errors.Is(err, docindex.ErrTooManyDeletes):
		return fmt.Errorf("%w (--allow-deletes)", err)
	case errors.Is(err, docindex.ErrVerify):
		return fmt.Errorf("%w: %w", errFailed, err)
	case err != nil:
		return err
	}
	if cfg.jsonOut {
		sum.Bad = rep.bad
		if err := writeJSON(stdout, sum); err != nil {
			return err
		}
	}
	if cfg.strict && len(sum.JobSummary.Bad) > 0 {
		return fmt.Errorf("%w: %d files skipped as bad (--strict)", errFailed, len(sum.JobSummary.Bad))
	}
	return nil
}

// indexReport shows a run of the index job (docindex.JobReport): a
// progress bar or lines, the status published, and a summary line per
// phase.
type indexReport struct {
	tg      *target
	pub     *runstatus.Publisher
	prog    *progress.Meter
	out     io.Writer
	jsonOut bool
	bad     []runstatus.Bad // as printed
}

func (r *indexReport) Start(phase string) {
	r.pub.Set(func(p *runstatus.Status) { p.Phase, p.Progress = phase, "" })
	if phase == docindex.PhaseCounting || phase == docindex.PhaseVerifying {
		r.prog.Begin(phase)
	}
}

func (r *indexReport) Progress(p docindex.JobProgress) {
	r.prog.Show(p.Label, p.Done, p.Total)
	r.pub.Set(func(pb *runstatus.Status) {
		pb.Progress = p.Words
		if p.Observers != nil {
			pb.Observers = p.Observers
		}
	})
}

func (r *indexReport) End(phase string, sum docindex.JobSummary, err error) {
	r.prog.End()
	if phase == docindex.PhaseLoading {
		r.bad = []runstatus.Bad{}
		for _, b := range sum.Bad {
			r.bad = append(r.bad, runstatus.Bad{Path: displayPath(b.Path), Reason: b.Reason})
		}
		r.pub.Set(func(p *runstatus.Status) { p.Bad, p.BadTotal = runstatus.BadList(r.bad) })
	}
	if err != nil {
		return
	}
	switch phase {
	case docindex.PhaseLoading:
		r.say("corpus:    %d files: %d new, %d changed, %d deleted, %d unchanged, %d read (loaded in %s)",
			sum.Files, sum.New, sum.Changed, sum.Deleted, sum.Unchanged, sum.Read, sum.LoadTime.Round(time.Millisecond))
		r.sayBad()
	case docindex.PhaseObservers:
		r.sayObservers(sum)
	case docindex.PhaseCounting:
		r.say("index:     %d documents, %d terms, %d duplicate clusters", sum.Documents, sum.Terms, sum.Clusters)
	case docindex.PhaseVerifying:
		r.say("verify:    the incremental index equals a from-scratch batch build")
	}
}

// say prints a summary line (unless printing JSON) and publishes it.
func (r *indexReport) say(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if !r.jsonOut {
		fmt.Fprintln(r.out, line)
	}
	r.pub.Set(func(p *runstatus.Status) { p.Summary = append(p.Summary, line) })
}

// sayBad lists the bad files, up to maxBadShown.
func (r *indexReport) sayBad() {
	if len(r.bad) == 0 {
		return
	}
	r.say("bad:       %d files skipped (the index keeps what it held for them):", len(r.bad))
	for _, b := range r.bad[:min(len(r.bad), maxBadShown)] {
		r.say("           %s: %s", b.Path, b.Reason)
	}
	if n := len(r.bad) - maxBadShown; n > 0 {
		r.say("           ... and %d more (percolator status %s lists them)", n, r.tg)
	}
}

func (r *indexReport) sayObservers(sum docindex.JobSummary) {
	for _, u := range sum.Unhandled {
		r.say("warning:   %d notified cells left for observer %s (column %s), which this program does not run", u.Pending, u.Observer, u.Column)
	}
	if sum.Observers != nil {
		r.pub.Set(func(p *runstatus.Status) { p.Observers = sum.Observers })
	}
	r.say("observers: %d runs (%s) with %d scanners in %s", sum.TotalRuns(), formatRuns(sum.Runs), sum.Scanners, sum.RunTime.Round(time.Millisecond))
	if sum.Quarantined > 0 {
		r.say("warning:   %d notifications quarantined (percolator notifications %s --quarantined)", sum.Quarantined, r.tg)
	}
}

func formatRuns(runs map[string]int64) string {
	var parts []string
	for _, name := range sortedKeys(runs) {
		parts = append(parts, fmt.Sprintf("%s %d", name, runs[name]))
	}
	return strings.Join(parts, ", ")
}

func printDups(ctx context.Context, db *percolator.DB, jsonOut bool, stdout io.Writer) error {
	ix, err := docindex.Export(ctx, db)
	if err != nil {
		return err
	}
	clusters := [][]string{}
	for _, c := range ix.Dups() {
		for i := range c {
			c[i] = displayPath(c[i])
		}
		clusters = append(clusters, c)
	}
	if jsonOut {
		return writeJSON(stdout, clusters)
	}
	if len(clusters) == 0 {
		fmt.Fprintln(stdout, "no duplicates")
	}
	for _, c := range clusters {
		fmt.Fprintf(stdout, "%s (canonical)\n", c[0])
		for _, p := range c[1:] {
			fmt.Fprintf(stdout, "  = %s\n", p)
		}
	}
	return nil
}
