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
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/docindex"
)

// indexConfig is what `index` was asked for.
type indexConfig struct {
	tg             cli.Target
	job            docindex.JobOptions
	dups           bool
	quiet, jsonOut bool
	strict         bool
	argv           []string // the command line, for the status file
}

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

The files indexed are by default those whose extension, in any case, is
.html, .htm, .txt or .md (the globs *.html, *.htm, *.txt, *.md).
--include GLOB replaces that set and --exclude GLOB leaves files out of
it, each repeatable; a glob (path.Match: *, ?, [a-z], \ escapes; case
matters) matches a file's slash-separated path under SRC_DIR or its name.
Names starting with "." and symbolic links are never indexed. The summary
counts the files skipped by type; a run deletes from the index the
documents it no longer chooses.

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
	cfg.tg.Register(pfs, "database directory (created if needed)")
	pfs.BoolVar(&cfg.jsonOut, "json", false, "print the summary, query results or clusters as JSON")
	fs.IntVar(&cfg.job.Scanners, "scanners", 4, "scanner threads running the observers")
	fs.IntVar(&cfg.job.Loaders, "loaders", 8, "concurrent loader transactions")
	fs.StringArrayVar(&cfg.job.Select.Include, "include", nil, "index the files `GLOB` matches instead of the default set, "+strings.Join(docindex.DefaultInclude(), ", ")+" (repeatable)")
	fs.StringArrayVar(&cfg.job.Select.Exclude, "exclude", nil, "leave out the files `GLOB` matches (repeatable)")
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
		return cli.Usagef("--dups takes no SRC_DIR, got %q", args)
	case !cfg.dups && len(args) != 1:
		return cli.Usagef("want one SRC_DIR (or query WORD, or --dups), got %q", args)
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.dups {
		return cli.WithDB(ctx, &cfg.tg, func(db *percolator.DB) error { return view.Dups(ctx, db, cfg.jsonOut, stdout) })
	}
	cfg.job.Src = args[0]
	if fi, err := os.Stat(cfg.job.Src); err != nil || !fi.IsDir() {
		return cli.Usagef("SRC_DIR %s is not a directory", cfg.job.Src)
	}
	return indexDir(ctx, *cfg, stdout, stderr)
}

func (cfg *indexConfig) validate() error {
	switch {
	case cfg.job.Scanners < 1 || cfg.job.Loaders < 1:
		return cli.Usagef("--scanners and --loaders must be at least 1")
	case cfg.job.MaxFileSize < 1:
		return cli.Usagef("--max-file-size must be at least 1")
	}
	if err := checkGlobs("include", cfg.job.Select.Include); err != nil {
		return err
	}
	if err := checkGlobs("exclude", cfg.job.Select.Exclude); err != nil {
		return err
	}
	return cfg.tg.Validate()
}

// checkGlobs refuses a malformed or empty glob of the flag.
func checkGlobs(flag string, globs []string) error {
	for _, g := range globs {
		if (docindex.Selection{Include: []string{g}}).Validate() != nil {
			return cli.Usagef("--%s %q: not a glob (path.Match: *, ?, [a-z], \\ escapes)", flag, g)
		}
	}
	return nil
}

// indexDir is the index job (docindex.RunJob) on the target's database.
// It publishes its status in its directory (an embedded store's) while it
// runs, and prints a summary line per phase, or the summary as JSON.
func indexDir(ctx context.Context, cfg indexConfig, stdout, stderr io.Writer) (err error) {
	start := time.Now()
	db, err := cfg.tg.Open(ctx, true)
	if err != nil {
		return err
	}
	pub := runstatus.Start(cfg.tg.PublishDir(), cfg.argv)
	defer func() {
		pub.Finish(err)
		err = errors.Join(err, db.Close())
	}()
	rep := &view.IndexReport{Target: cfg.tg.String(), Pub: pub, Prog: progress.New(ctx, stderr, cfg.quiet), Out: stdout, JSON: cfg.jsonOut}
	cfg.job.Report = rep
	sum := view.IndexSummary{OpenTime: time.Since(start)}
	sum.JobSummary, err = docindex.RunJob(ctx, db, cfg.job)
	switch {
	case errors.Is(err, docindex.ErrTooManyDeletes):
		return fmt.Errorf("%w (--allow-deletes)", err)
	case errors.Is(err, docindex.ErrVerify):
		return fmt.Errorf("%w: %w", cli.ErrFailed, err)
	case err != nil:
		return err
	}
	if cfg.jsonOut {
		if err := view.JSON(stdout, sum); err != nil {
			return err
		}
	}
	if cfg.strict && len(sum.JobSummary.Bad) > 0 {
		return fmt.Errorf("%w: %d files skipped as bad (--strict)", cli.ErrFailed, len(sum.JobSummary.Bad))
	}
	return nil
}
