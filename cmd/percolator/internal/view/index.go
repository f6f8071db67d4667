package view

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/docindex"
)

// maxBadShown bounds the bad files the summary lists, maxTypesShown the
// types of the files skipped.
const (
	maxBadShown   = 20
	maxTypesShown = 10
)

// IndexSummary is what an index run did, as --json prints it: the job's
// summary, with the bad files' paths and the skipped files' extensions
// as paths print (Skipped), and the time it took to open the database.
type IndexSummary struct {
	docindex.JobSummary
	Bad      []runstatus.Bad `json:"bad_files"`
	Skipped  map[string]int  `json:"skipped_by_type"` // extension ("" for none) -> files
	OpenTime time.Duration   `json:"open_ns"`
}

// Skipped is the count of skipped files by extension with each
// extension as paths print (Path).
func Skipped(byExt map[string]int) map[string]int {
	m := make(map[string]int, len(byExt))
	for ext, n := range byExt {
		m[Path(ext)] += n
	}
	return m
}

// IndexReport shows a run of the index job (docindex.JobReport): each
// step's progress on Prog (a step is a phase of the meter: what it
// counts and its total change together), the status published, and a
// summary line per phase (unless JSON, which the caller prints at the
// end). Progress may be called concurrently; mu guards step.
type IndexReport struct {
	Target string // the target's flags, which the advice names
	Pub    *runstatus.Publisher
	Prog   *progress.Meter
	Out    io.Writer
	JSON   bool
	// Bad are the bad files as printed, set once loading ended.
	Bad []runstatus.Bad

	mu   sync.Mutex
	step string // the step Prog shows
}

func (r *IndexReport) Start(phase string) {
	r.Pub.Set(func(p *runstatus.Status) { p.Phase, p.Progress = phase, "" })
}

func (r *IndexReport) Progress(p docindex.JobProgress) {
	r.mu.Lock()
	if p.Step != r.step {
		r.step = p.Step
		r.Prog.Start(p.Step, p.Total) // ends the step before, which completed
	}
	r.Prog.Detail(p.Done, p.Detail)
	r.mu.Unlock()
	r.Pub.Set(func(pb *runstatus.Status) {
		pb.Progress = p.Words
		if p.Observers != nil {
			pb.Observers = p.Observers
		}
	})
}

func (r *IndexReport) End(phase string, sum docindex.JobSummary, err error) {
	r.mu.Lock()
	r.Prog.End(err)
	r.step = ""
	r.mu.Unlock()
	if phase == docindex.PhaseLoading {
		r.Bad = []runstatus.Bad{}
		for _, b := range sum.Bad {
			r.Bad = append(r.Bad, runstatus.Bad{Path: Path(b.Path), Reason: b.Reason})
		}
		r.Pub.Set(func(p *runstatus.Status) { p.Bad, p.BadTotal = runstatus.BadList(r.Bad) })
	}
	if err != nil {
		return
	}
	switch phase {
	case docindex.PhaseLoading:
		r.say("corpus:    %d files: %d new, %d changed, %d deleted, %d unchanged, %d read (loaded in %s)",
			sum.Files, sum.New, sum.Changed, sum.Deleted, sum.Unchanged, sum.Read, sum.LoadTime.Round(time.Millisecond))
		r.saySkipped(sum.Skipped)
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
func (r *IndexReport) say(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if !r.JSON {
		fmt.Fprintln(r.Out, line)
	}
	r.Pub.Set(func(p *runstatus.Status) { p.Summary = append(p.Summary, line) })
}

// sayBad lists the bad files, up to maxBadShown.
func (r *IndexReport) sayBad() {
	if len(r.Bad) == 0 {
		return
	}
	r.say("bad:       %d files skipped (the index keeps what it held for them):", len(r.Bad))
	for _, b := range r.Bad[:min(len(r.Bad), maxBadShown)] {
		r.say("           %s: %s", b.Path, b.Reason)
	}
	if n := len(r.Bad) - maxBadShown; n > 0 {
		r.say("           ... and %d more (percolator status %s lists them)", n, r.Target)
	}
}

// saySkipped counts the files skipped by type, the most common first, up
// to maxTypesShown types.
func (r *IndexReport) saySkipped(byExt map[string]int) {
	total := 0
	for _, n := range byExt {
		total += n
	}
	if total == 0 {
		return
	}
	exts := sortedKeys(byExt)
	slices.SortStableFunc(exts, func(a, b string) int { return cmp.Compare(byExt[b], byExt[a]) })
	var parts []string
	for _, ext := range exts[:min(len(exts), maxTypesShown)] {
		label := "(none)"
		if ext != "" {
			label = Path(ext)
		}
		parts = append(parts, fmt.Sprintf("%s %d", label, byExt[ext]))
	}
	if rest := exts[min(len(exts), maxTypesShown):]; len(rest) > 0 {
		n := 0
		for _, ext := range rest {
			n += byExt[ext]
		}
		parts = append(parts, fmt.Sprintf("and %d of %d other types", n, len(rest)))
	}
	r.say("skipped:   %d files by type: %s", total, strings.Join(parts, ", "))
}

func (r *IndexReport) sayObservers(sum docindex.JobSummary) {
	for _, u := range sum.Unhandled {
		r.say("warning:   %d notified cells left for observer %s (column %s), which this program does not run", u.Pending, u.Observer, u.Column)
	}
	if sum.Observers != nil {
		r.Pub.Set(func(p *runstatus.Status) { p.Observers = sum.Observers })
	}
	r.say("observers: %d runs (%s) with %d scanners in %s", sum.TotalRuns(), formatRuns(sum.Runs), sum.Scanners, sum.RunTime.Round(time.Millisecond))
	if sum.Quarantined > 0 {
		r.say("warning:   %d notifications quarantined (percolator notifications %s --quarantined)", sum.Quarantined, r.Target)
	}
}

func formatRuns(runs map[string]int64) string {
	var parts []string
	for _, name := range sortedKeys(runs) {
		parts = append(parts, fmt.Sprintf("%s %d", name, runs[name]))
	}
	return strings.Join(parts, ", ")
}

// Dups prints the index's duplicate clusters, canonical document first.
func Dups(ctx context.Context, db *percolator.DB, jsonOut bool, w io.Writer) error {
	ix, err := docindex.Export(ctx, db)
	if err != nil {
		return err
	}
	clusters := [][]string{}
	for _, c := range ix.Dups() {
		for i := range c {
			c[i] = Path(c[i])
		}
		clusters = append(clusters, c)
	}
	if jsonOut {
		return JSON(w, clusters)
	}
	if len(clusters) == 0 {
		fmt.Fprintln(w, "no duplicates")
	}
	for _, c := range clusters {
		fmt.Fprintf(w, "%s (canonical)\n", c[0])
		for _, p := range c[1:] {
			fmt.Fprintf(w, "  = %s\n", p)
		}
	}
	return nil
}

// Query prints the canonical documents with word, and their titles.
func Query(ctx context.Context, db *percolator.DB, word string, jsonOut bool, w io.Writer) error {
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
		hits = append(hits, hit{Path(p), Text(title)})
	}
	if jsonOut {
		return JSON(w, hits)
	}
	if len(hits) == 0 {
		fmt.Fprintf(w, "no document has %q\n", word)
	}
	for _, h := range hits {
		fmt.Fprintf(w, "%s\t%s\n", h.Path, h.Title)
	}
	return nil
}
