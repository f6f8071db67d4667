package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
)

// percolator index: the main job. Keeps an index of a directory of text
// and HTML files current through a chain of observers (docindex).
//
//	percolator index --dir D | --server ADDR [flags] SRC_DIR
//	percolator index --dir D | --server ADDR query WORD
//	percolator index --dir D | --server ADDR --dups

type indexConfig struct {
	tg                     target
	src                    string
	scanners, loaders      int
	maxFileSize            int64
	verify, quiet, jsonOut bool
	strict, rehash         bool
	allowDeletes           bool
	args                   []string // the command line, for the status file
}

// maxBadShown bounds the bad files the summary lists.
const maxBadShown = 20

func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("index", stderr)
	cfg := indexConfig{args: append([]string{"index"}, args...)}
	cfg.tg.register(fs, "database directory (created if needed)")
	fs.IntVar(&cfg.scanners, "scanners", 4, "scanner threads running the observers")
	fs.IntVar(&cfg.loaders, "loaders", 8, "concurrent loader transactions")
	fs.Int64Var(&cfg.maxFileSize, "max-file-size", docindex.DefaultMaxFileSize, "largest file to index, in bytes; larger ones are skipped as bad")
	fs.BoolVar(&cfg.verify, "verify", false, "check the index against a from-scratch batch build of SRC_DIR")
	dups := fs.Bool("dups", false, "list the duplicate clusters")
	fs.BoolVar(&cfg.quiet, "quiet", false, "no progress")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the summary, query results or clusters as JSON")
	fs.BoolVar(&cfg.strict, "strict", false, "exit 1 if any file was skipped as bad (they are reported either way)")
	fs.BoolVar(&cfg.rehash, "rehash", false, "read and compare every file, even those whose size, mtime and inode are unchanged")
	fs.BoolVar(&cfg.allowDeletes, "allow-deletes", false, "allow deleting more than half of the indexed documents in one run")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: percolator index --dir D | --server ADDR [flags] SRC_DIR\n       percolator index --dir D | --server ADDR [--json] query WORD\n       percolator index --dir D | --server ADDR [--json] --dups\n\nflags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	switch {
	case *dups && len(rest) == 0:
	case len(rest) == 2 && rest[0] == "query":
	case len(rest) == 1 && rest[0] != "query" && !*dups:
	default:
		return usagef("want SRC_DIR, query WORD or --dups")
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	switch {
	case *dups:
		return withDB(ctx, &cfg.tg, func(db *percolator.DB) error { return printDups(ctx, db, cfg.jsonOut, stdout) })
	case rest[0] == "query":
		return withDB(ctx, &cfg.tg, func(db *percolator.DB) error { return printQuery(ctx, db, rest[1], cfg.jsonOut, stdout) })
	}
	cfg.src = rest[0]
	if fi, err := os.Stat(cfg.src); err != nil || !fi.IsDir() {
		return usagef("SRC_DIR %s is not a directory", cfg.src)
	}
	return indexDir(ctx, cfg, stdout, stderr)
}

func (cfg *indexConfig) validate() error {
	switch {
	case cfg.scanners < 1 || cfg.loaders < 1:
		return usagef("--scanners and --loaders must be at least 1")
	case cfg.maxFileSize < 1:
		return usagef("--max-file-size must be at least 1")
	}
	return cfg.tg.validate()
}

// indexSummary is what an index run did, printed as text or JSON.
type indexSummary struct {
	Files       int              `json:"files"`
	New         int              `json:"new"`
	Changed     int              `json:"changed"`
	Deleted     int              `json:"deleted"`
	Unchanged   int              `json:"unchanged"`
	Read        int              `json:"read"`
	Bad         []badJSON        `json:"bad_files"`
	OpenTime    time.Duration    `json:"open_ns"`
	ScanTime    time.Duration    `json:"scan_ns"`
	LoadTime    time.Duration    `json:"load_ns"`
	Runs        map[string]int64 `json:"observer_runs"`
	Scanners    int              `json:"scanners"`
	RunTime     time.Duration    `json:"observers_ns"`
	Quarantined int              `json:"quarantined"`
	Documents   int64            `json:"documents"`
	Terms       int64            `json:"terms"`
	Clusters    int64            `json:"duplicate_clusters"`
	CountTime   time.Duration    `json:"count_ns"`
	Verified    bool             `json:"verified,omitempty"`
}

// indexDir is the index job: load what changed in cfg.src, run the
// observers to quiescence, count, and optionally verify. It publishes its
// status in its directory (an embedded store's) while it runs.
func indexDir(ctx context.Context, cfg indexConfig, stdout, stderr io.Writer) (err error) {
	start := time.Now()
	db, err := cfg.tg.open(ctx, true)
	if err != nil {
		return err
	}
	pub := startPublishing(cfg.tg.publishDir(), cfg.args)
	defer func() {
		pub.finish(err)
		err = errors.Join(err, db.Close())
	}()
	j := &indexJob{cfg: cfg, db: db, pub: pub, prog: newProgress(stderr, cfg.quiet), out: stdout}
	j.sum.OpenTime = time.Since(start)
	return j.run(ctx)
}

// indexJob is one run of the index job.
type indexJob struct {
	cfg  indexConfig
	db   *percolator.DB
	pub  *publisher
	prog *progress
	out  io.Writer
	sum  indexSummary

	files []docindex.File
	st    docindex.SyncStats
}

func (j *indexJob) run(ctx context.Context) error {
	for _, step := range []func(context.Context) error{j.load, j.observe, j.count, j.verify} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if j.cfg.jsonOut {
		if err := writeJSON(j.out, j.sum); err != nil {
			return err
		}
	}
	if j.cfg.strict && len(j.st.Bad) > 0 {
		return fmt.Errorf("%w: %d files skipped as bad (--strict)", errFailed, len(j.st.Bad))
	}
	return nil
}

// say prints a summary line (unless printing JSON) and publishes it.
func (j *indexJob) say(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if !j.cfg.jsonOut {
		fmt.Fprintln(j.out, line)
	}
	j.pub.set(func(p *published) { p.Summary = append(p.Summary, line) })
}

// load lists the source directory and loads what changed.
func (j *indexJob) load(ctx context.Context) error {
	j.pub.set(func(p *published) { p.Phase = "loading" })
	start := time.Now()
	files, bad, err := docindex.ScanDir(j.cfg.src)
	if err != nil {
		return err
	}
	j.files = files
	if err := docindex.Register(ctx, j.db); err != nil {
		return err
	}
	j.sum.ScanTime = time.Since(start)
	opts := docindex.SyncOptions{MaxFileSize: j.cfg.maxFileSize, Rehash: j.cfg.rehash, AllowDeletes: j.cfg.allowDeletes}
	opts.Load.Concurrency = j.cfg.loaders
	opts.Load.Progress = func(done, total int) {
		j.prog.show("loading", int64(done), int64(total))
		j.pub.set(func(p *published) { p.Progress = fmt.Sprintf("%d of %d files to read or delete", done, total) })
	}
	start = time.Now()
	j.st, err = docindex.Sync(ctx, j.db, files, bad, opts)
	j.prog.end()
	j.recordBad()
	if errors.Is(err, docindex.ErrTooManyDeletes) {
		return fmt.Errorf("%w (--allow-deletes)", err)
	}
	if err != nil {
		return err
	}
	j.sum.Files, j.sum.New, j.sum.Changed, j.sum.Deleted = len(files), j.st.New, j.st.Changed, j.st.Deleted
	j.sum.Unchanged, j.sum.Read, j.sum.LoadTime = j.st.Unchanged, j.st.Read, time.Since(start)
	j.say("corpus:    %d files: %d new, %d changed, %d deleted, %d unchanged, %d read (loaded in %s)",
		len(files), j.st.New, j.st.Changed, j.st.Deleted, j.st.Unchanged, j.st.Read, j.sum.LoadTime.Round(time.Millisecond))
	j.sayBad()
	return nil
}

func (j *indexJob) recordBad() {
	j.sum.Bad = []badJSON{}
	for _, b := range j.st.Bad {
		j.sum.Bad = append(j.sum.Bad, badJSON{Path: displayPath(b.Path), Reason: b.Reason})
	}
	j.pub.set(func(p *published) { p.Bad, p.BadTotal = badList(j.sum.Bad) })
}

// sayBad lists the bad files, up to maxBadShown.
func (j *indexJob) sayBad() {
	if len(j.sum.Bad) == 0 {
		return
	}
	j.say("bad:       %d files skipped (the index keeps what it held for them):", len(j.sum.Bad))
	for _, b := range j.sum.Bad[:min(len(j.sum.Bad), maxBadShown)] {
		j.say("           %s: %s", b.Path, b.Reason)
	}
	if n := len(j.sum.Bad) - maxBadShown; n > 0 {
		j.say("           ... and %d more (percolator status %s lists them)", n, &j.cfg.tg)
	}
}

// observe runs the observers to quiescence, showing their progress.
func (j *indexJob) observe(ctx context.Context) error {
	before, err := j.db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	j.pub.set(func(p *published) { p.Phase, p.Progress = "observers", "" })
	start := time.Now()
	mon := startMonitor(ctx, j.db, before, j.prog, j.pub)
	rep, err := j.db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: j.cfg.scanners, Drain: true})
	mon.stop()
	j.prog.end()
	if err != nil {
		return err
	}
	for _, u := range rep.Unhandled {
		j.say("warning:   %d notified cells left for observer %s (column %s), which this program does not run", u.Pending, u.Observer, u.Column)
	}
	j.sum.RunTime, j.sum.Scanners = time.Since(start), j.cfg.scanners
	after, err := j.db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	j.pub.set(func(p *published) { p.Observers = &after })
	var total int64
	j.sum.Runs, total = diffRuns(before, after)
	j.sum.Quarantined = after.Quarantined
	j.say("observers: %d runs (%s) with %d scanners in %s", total, formatRuns(j.sum.Runs), j.cfg.scanners, j.sum.RunTime.Round(time.Millisecond))
	if after.Quarantined > 0 {
		j.say("warning:   %d notifications quarantined (percolator notifications %s --quarantined)", after.Quarantined, &j.cfg.tg)
	}
	return nil
}

// count folds what the observers changed into the summary counts.
func (j *indexJob) count(ctx context.Context) error {
	j.pub.set(func(p *published) { p.Phase = "counting" })
	start := time.Now()
	j.prog.begin("counting")
	c, err := docindex.CountIndex(ctx, j.db)
	j.prog.end()
	if err != nil {
		return err
	}
	j.sum.Documents, j.sum.Terms, j.sum.Clusters, j.sum.CountTime = c.Documents, c.Terms, c.Clusters, time.Since(start)
	j.say("index:     %d documents, %d terms, %d duplicate clusters", c.Documents, c.Terms, c.Clusters)
	return nil
}

// verify compares the index with a batch build of what it was given.
func (j *indexJob) verify(ctx context.Context) error {
	if !j.cfg.verify {
		return nil
	}
	j.pub.set(func(p *published) { p.Phase = "verifying" })
	j.prog.begin("verifying")
	defer j.prog.end()
	ix, err := docindex.Export(ctx, j.db)
	if err != nil {
		return err
	}
	ref, unread, err := docindex.Reference(ctx, j.db, j.files, j.st.Bad)
	switch {
	case err != nil:
		return err
	case len(unread) > 0:
		return fmt.Errorf("%w: %s changed while verifying: %s", errFailed, displayPath(unread[0].Path), unread[0].Reason)
	}
	if err := ix.Equal(docindex.Build(ref)); err != nil {
		return fmt.Errorf("%w: the incremental index differs from a batch build: %v", errFailed, err)
	}
	if ix.Counts() != (docindex.Counts{Documents: j.sum.Documents, Terms: j.sum.Terms, Clusters: j.sum.Clusters}) {
		return fmt.Errorf("%w: the counts %d/%d/%d differ from the index's %+v", errFailed, j.sum.Documents, j.sum.Terms, j.sum.Clusters, ix.Counts())
	}
	j.sum.Verified = true
	j.say("verify:    the incremental index equals a from-scratch batch build")
	return nil
}

// diffRuns returns the observer runs between two statuses, per observer,
// and their sum.
func diffRuns(before, after percolator.ObserverStatus) (map[string]int64, int64) {
	old := map[string]int64{}
	for _, o := range before.Observers {
		old[o.Name] = o.Counts["runs"]
	}
	runs := map[string]int64{}
	var total int64
	for _, o := range after.Observers {
		runs[o.Name] = o.Counts["runs"] - old[o.Name]
		total += runs[o.Name]
	}
	return runs, total
}

func formatRuns(runs map[string]int64) string {
	var parts []string
	for _, name := range sortedKeys(runs) {
		parts = append(parts, fmt.Sprintf("%s %d", name, runs[name]))
	}
	return strings.Join(parts, ", ")
}

func printQuery(ctx context.Context, db *percolator.DB, word string, jsonOut bool, stdout io.Writer) error {
	paths, err := docindex.Query(ctx, db, word)
	if err != nil {
		return err
	}
	type hit struct {
		Path  string `json:"path"`
		Title string `json:"title"`
	}
	hits := []hit{}
	for _, p := range paths {
		title, err := docindex.Title(ctx, db, p)
		if err != nil {
			return err
		}
		hits = append(hits, hit{displayPath(p), displayText(title)})
	}
	if jsonOut {
		return writeJSON(stdout, hits)
	}
	if len(hits) == 0 {
		fmt.Fprintf(stdout, "no document has %q\n", word)
	}
	for _, h := range hits {
		fmt.Fprintf(stdout, "%s\t%s\n", h.Path, h.Title)
	}
	return nil
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
