package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
)

// percolator index: the main job. Keeps an index of a directory of text
// and HTML files current through a chain of observers (docindex).
//
//	percolator index --dir D [--scanners N] [--verify] SRC_DIR
//	percolator index --dir D query WORD
//	percolator index --dir D --dups
func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("index", stderr)
	dir := fs.String("dir", "", "database directory")
	scanners := fs.Int("scanners", 4, "scanner threads running the observers")
	loaders := fs.Int("loaders", 8, "concurrent loader transactions")
	verify := fs.Bool("verify", false, "check the index against a from-scratch batch build of SRC_DIR")
	dups := fs.Bool("dups", false, "list the duplicate clusters")
	quiet := fs.Bool("quiet", false, "no progress bar")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: percolator index --dir D [flags] SRC_DIR\n       percolator index --dir D query WORD\n       percolator index --dir D --dups\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	switch {
	case *dups && len(rest) == 0:
	case len(rest) == 2 && rest[0] == "query":
	case len(rest) == 1 && rest[0] != "query" && !*dups:
	default:
		fs.Usage()
		return fmt.Errorf("%w: want SRC_DIR, query WORD or --dups", percolator.ErrInvalidArgument)
	}
	if *scanners < 1 || *loaders < 1 {
		return fmt.Errorf("%w: --scanners and --loaders must be at least 1", percolator.ErrInvalidArgument)
	}
	db, err := openDir(ctx, *dir)
	if err != nil {
		return err
	}
	defer db.Close()
	switch {
	case *dups:
		return printDups(ctx, db, stdout)
	case rest[0] == "query":
		return printQuery(ctx, db, rest[1], stdout)
	}
	return indexDir(ctx, db, rest[0], indexConfig{scanners: *scanners, loaders: *loaders, verify: *verify, quiet: *quiet}, stdout, stderr)
}

type indexConfig struct {
	scanners, loaders int
	verify, quiet     bool
}

func indexDir(ctx context.Context, db *percolator.DB, src string, cfg indexConfig, stdout, stderr io.Writer) error {
	files, bad, err := docindex.ScanDir(src)
	if err != nil {
		return err
	}
	if err := docindex.Register(ctx, db); err != nil {
		return err
	}
	before, err := db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var bar *progressbar.ProgressBar
	opts := percolator.LoadOptions{Concurrency: cfg.loaders}
	if !cfg.quiet {
		opts.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("loading"),
					progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond))
			}
			_ = bar.Set(done)
		}
	}
	st, err := docindex.Sync(ctx, db, files, bad, docindex.SyncOptions{Load: opts})
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return err
	}
	loaded := time.Since(start)
	fmt.Fprintf(stdout, "corpus:    %d files: %d new, %d changed, %d deleted, %d unchanged (loaded in %s)\n",
		len(files), st.New, st.Changed, st.Deleted, st.Unchanged, loaded.Round(time.Millisecond))
	start = time.Now()
	if err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: cfg.scanners, Drain: true}); err != nil {
		return err
	}
	took := time.Since(start)
	after, err := db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	runs, parts := diffRuns(before, after)
	fmt.Fprintf(stdout, "observers: %d runs (%s) with %d scanners in %s\n", runs, parts, cfg.scanners, took.Round(time.Millisecond))
	if after.Quarantined > 0 {
		fmt.Fprintf(stdout, "warning:   %d notifications quarantined (percolator notifications --quarantined)\n", after.Quarantined)
	}
	counts, err := docindex.CountIndex(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "index:     %d documents, %d terms, %d duplicate clusters\n", counts.Documents, counts.Terms, counts.Clusters)
	if cfg.verify {
		ix, err := docindex.Export(ctx, db)
		if err != nil {
			return err
		}
		ref, _, err := docindex.Reference(ctx, db, files, st.Bad)
		if err != nil {
			return err
		}
		if err := ix.Equal(docindex.Build(ref)); err != nil {
			return fmt.Errorf("%w: the incremental index differs from a batch build: %v", errFailed, err)
		}
		fmt.Fprintln(stdout, "verify:    the incremental index equals a from-scratch batch build")
	}
	return nil
}

// diffRuns sums the observer runs between two statuses, and names them
// per observer.
func diffRuns(before, after percolator.ObserverStatus) (int64, string) {
	old := map[string]int64{}
	for _, o := range before.Observers {
		old[o.Name] = o.Counts["runs"]
	}
	var total int64
	var parts []string
	for _, o := range after.Observers {
		d := o.Counts["runs"] - old[o.Name]
		total += d
		parts = append(parts, fmt.Sprintf("%s %d", o.Name, d))
	}
	return total, strings.Join(parts, ", ")
}

func printQuery(ctx context.Context, db *percolator.DB, word string, stdout io.Writer) error {
	paths, err := docindex.Query(ctx, db, word)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		fmt.Fprintf(stdout, "no document has %q\n", word)
		return nil
	}
	for _, p := range paths {
		title, err := docindex.Title(ctx, db, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\t%s\n", p, title)
	}
	return nil
}

func printDups(ctx context.Context, db *percolator.DB, stdout io.Writer) error {
	ix, err := docindex.Export(ctx, db)
	if err != nil {
		return err
	}
	clusters := ix.Dups()
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

// percolator status: the notification backlog and the observers' counters.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	dir := fs.String("dir", "", "database directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openDir(ctx, *dir)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "COLUMN\tPENDING\tOLDEST")
	for _, c := range st.Columns {
		oldest := "-"
		if c.Pending > 0 {
			oldest = c.Oldest.Round(time.Millisecond).String()
		}
		fmt.Fprintf(stdout, "%s\t%d\t%s\n", c.Column, c.Pending, oldest)
	}
	fmt.Fprintln(stdout, "\nOBSERVER\tCOLUMN\tRUNS\tCOMMITS\tCONFLICTS\tFAILURES\tQUARANTINED")
	sort.Slice(st.Observers, func(i, j int) bool { return st.Observers[i].Name < st.Observers[j].Name })
	for _, o := range st.Observers {
		c := o.Counts
		fmt.Fprintf(stdout, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", o.Name, o.Column, c["runs"], c["commits"], c["conflicts"], c["failures"], c["quarantined"])
	}
	fmt.Fprintf(stdout, "\nquarantined notifications: %d\n", st.Quarantined)
	sc := st.Scanners
	fmt.Fprintf(stdout, "scanners: %d scans found %d notified rows, visiting %d keys in %s; %d jumps, %d compactions of the notify keyspace\n",
		sc["scans"], sc["scan_rows"], sc["scan_keys"], (time.Duration(sc["scan_micros"]) * time.Microsecond).Round(time.Millisecond), sc["scanner_jumps"], sc["compactions"])
	return nil
}

// percolator notifications: pending (default) or quarantined
// notifications; --retry re-queues the quarantined ones.
func runNotifications(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("notifications", stderr)
	dir := fs.String("dir", "", "database directory")
	quarantined := fs.Bool("quarantined", false, "list the quarantined notifications")
	retry := fs.Bool("retry", false, "re-queue every quarantined notification")
	limit := fs.Int("limit", 100, "list at most this many pending notifications (0: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openDir(ctx, *dir)
	if err != nil {
		return err
	}
	defer db.Close()
	switch {
	case *retry:
		n, err := db.RetryQuarantined(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "re-queued %d notifications\n", n)
	case *quarantined:
		qs, err := db.Quarantine(ctx)
		if err != nil {
			return err
		}
		for _, q := range qs {
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%d failures\t%s\n", q.Row, q.Column, q.Observer, q.Failures, firstLineOf(q.Error))
		}
		fmt.Fprintf(stdout, "%d quarantined\n", len(qs))
	default:
		ps, err := db.PendingNotifications(ctx, *limit)
		if err != nil {
			return err
		}
		for _, p := range ps {
			fmt.Fprintf(stdout, "%s\t%s\t%d changes\t%s old\n", p.Row, p.Column, p.Versions, p.Age.Round(time.Millisecond))
		}
		fmt.Fprintf(stdout, "%d pending (listing at most %d)\n", len(ps), *limit)
	}
	return nil
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
