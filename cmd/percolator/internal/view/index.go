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

// IndexSummary is what an index run did: the job's summary and the time
// it took to open the database; --json prints it by MarshalJSON.
type IndexSummary struct {
	docindex.JobSummary
	OpenTime time.Duration
}

// indexSummaryJSON is IndexSummary as `index --json` prints it.
type indexSummaryJSON struct {
	Files       int              `json:"files"`
	Skipped     map[string]int   `json:"skipped_by_type"` // extension as paths print ("" for none) -> files
	New         int              `json:"new"`
	Changed     int              `json:"changed"`
	Deleted     int              `json:"deleted"`
	Unchanged   int              `json:"unchanged"`
	Read        int              `json:"read"`
	Bad         []badFileJSON    `json:"bad_files"`
	ScanS       float64          `json:"scan_s"`
	LoadS       float64          `json:"load_s"`
	Runs        map[string]int64 `json:"observer_runs"`
	Scanners    int              `json:"scanners"`
	ObserversS  float64          `json:"observers_s"`
	Quarantined int              `json:"quarantined"`
	Documents   int64            `json:"documents"`
	Terms       int64            `json:"terms"`
	Clusters    int64            `json:"duplicate_clusters"`
	CountS      float64          `json:"count_s"`
	Verified    bool             `json:"verified"`
	OpenS       float64          `json:"open_s"`
}

type badFileJSON struct {
	Path   UserBytes `json:"path"`
	Reason string    `json:"reason"`
}

func (b badFileJSON) MarshalJSON() ([]byte, error) { return marshalFlat(b) }

// MarshalJSON prints the summary by the convention of --json.
func (s IndexSummary) MarshalJSON() ([]byte, error) {
	j := s.JobSummary
	out := indexSummaryJSON{Files: j.Files, Skipped: Skipped(j.Skipped), New: j.New, Changed: j.Changed, Deleted: j.Deleted,
		Unchanged: j.Unchanged, Read: j.Read, Bad: []badFileJSON{}, ScanS: Seconds(j.ScanTime), LoadS: Seconds(j.LoadTime),
		Runs: nonNil(j.Runs), Scanners: j.Scanners, ObserversS: Seconds(j.RunTime), Quarantined: j.Quarantined,
		Documents: j.Documents, Terms: j.Terms, Clusters: j.Clusters, CountS: Seconds(j.CountTime), Verified: j.Verified,
		OpenS: Seconds(s.OpenTime)}
	for _, b := range j.Bad {
		out.Bad = append(out.Bad, badFileJSON{UserBytes(b.Path), b.Reason})
	}
	return marshalNoHTML(out)
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
	dups := ix.Dups()
	if jsonOut {
		clusters := [][]pathJSON{}
		for _, c := range dups {
			var list []pathJSON
			for _, p := range c {
				list = append(list, pathJSON{UserBytes(p)})
			}
			clusters = append(clusters, list)
		}
		return JSON(w, clusters)
	}
	clusters := [][]string{}
	for _, c := range dups {
		for i := range c {
			c[i] = Path(c[i])
		}
		clusters = append(clusters, c)
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
	hits := []hitJSON{}
	for _, p := range paths {
		title, err := docindex.Title(ctx, db, p)
		if err != nil {
			return err
		}
		hits = append(hits, hitJSON{UserBytes(p), UserBytes(title)})
	}
	if jsonOut {
		return JSON(w, hits)
	}
	if len(hits) == 0 {
		fmt.Fprintf(w, "no document has %q\n", word)
	}
	for _, h := range hits {
		fmt.Fprintf(w, "%s\t%s\n", Path(string(h.Path)), Text(string(h.Title)))
	}
	return nil
}

// pathJSON is a document's path as `index --dups --json` prints it.
type pathJSON struct {
	Path UserBytes `json:"path"`
}

func (p pathJSON) MarshalJSON() ([]byte, error) { return marshalFlat(p) }

// hitJSON is a document as `index query --json` prints it.
type hitJSON struct {
	Path  UserBytes `json:"path"`
	Title UserBytes `json:"title"`
}

func (h hitJSON) MarshalJSON() ([]byte, error) { return marshalFlat(h) }
