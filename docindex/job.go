package docindex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
)

// The phases of a run of the job, in order, as RunJob reports them.
const (
	PhaseLoading   = "loading"   // list the source directory, load what changed
	PhaseObservers = "observers" // run the observers to quiescence
	PhaseCounting  = "counting"  // fold what they changed into the counts
	PhaseVerifying = "verifying" // compare with a batch build (JobOptions.Verify)
)

// ErrVerify: the index a run built differs from a batch build of the
// files it loaded, or a file changed while it was compared (a
// *VerifyError says how).
var ErrVerify = errors.New("docindex: the index does not verify")

// VerifyError is ErrVerify with the difference found.
type VerifyError struct{ Reason string }

func (e *VerifyError) Error() string { return e.Reason }

// Is makes a VerifyError match ErrVerify.
func (e *VerifyError) Is(target error) bool { return target == ErrVerify }

// JobOptions configures a run of the index job (RunJob). The zero value
// is usable given Src.
type JobOptions struct {
	// Src is the directory whose files the index holds, those Select
	// chooses (the zero Selection: the Indexable ones). A run deletes
	// from the index the documents it no longer chooses (Sync's limit on
	// deletes applies).
	Src    string
	Select Selection
	// Scanners run the observers (0: 4); Loaders are the loader's
	// concurrent transactions (0: 8).
	Scanners, Loaders int
	// MaxFileSize, Rehash and AllowDeletes are Sync's (SyncOptions).
	MaxFileSize  int64
	Rehash       bool
	AllowDeletes bool
	// Verify compares the index, once counted, with a batch build of the
	// files loaded (ErrVerify).
	Verify bool
	// Report follows the run; nil: nobody does.
	Report JobReport
}

// EnsureDefaults sets the zero fields that have defaults.
func (o *JobOptions) EnsureDefaults() {
	if o.Scanners == 0 {
		o.Scanners = 4
	}
	if o.Loaders == 0 {
		o.Loaders = 8
	}
	if o.MaxFileSize == 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
}

// JobReport follows a run of the job. Start and End bracket each phase
// (PhaseLoading, ...) and are called from the goroutine running the job;
// End is called whether the phase failed (err) or not, with the summary
// so far. Progress reports how far a phase got, from other goroutines
// too, and concurrently with itself.
type JobReport interface {
	Start(phase string)
	Progress(JobProgress)
	End(phase string, sum JobSummary, err error)
}

// JobProgress is how far a step of a phase got: Done of Total of what
// Step names (StepListing, ...). Each step reports Done 0 as it starts,
// then as it goes. Total is known when the step starts and never
// changes within it; TotalUnknown if the step cannot know it. Detail
// says what else a reading knows (the notifications left), Words all
// of it for a status line. During PhaseObservers, Observers is the
// observers' status of the reading.
type JobProgress struct {
	Phase       string
	Step        string
	Done, Total int64
	Detail      string
	Words       string
	Observers   *percolator.ObserverStatus
}

// TotalUnknown is the Total of a step whose length is not known as it
// starts.
const TotalUnknown = -1

// The steps of the phases, each named after what it counts.
const (
	StepListing   = "listing: files"                 // PhaseLoading
	StepComparing = "loading: indexed records read"  // PhaseLoading, to compare the files with
	StepLoading   = "loading: files read or deleted" // PhaseLoading
	StepObservers = "observers: runs"                // PhaseObservers
	StepCounting  = "counting: dirty rows folded"    // PhaseCounting
	StepExporting = "verifying: index rows read"     // PhaseVerifying
	StepRereading = "verifying: files read again"    // PhaseVerifying
)

// progress reports a step's reading.
func (j *job) progress(phase, step string, done, total int64, detail string) {
	words := fmt.Sprintf("%s %d", step, done)
	if total != TotalUnknown {
		words += fmt.Sprintf(" of %d", total)
	}
	if detail != "" {
		words += ", " + detail
	}
	j.opts.Report.Progress(JobProgress{Phase: phase, Step: step, Done: done, Total: total, Detail: detail, Words: words})
}

// JobSummary is what a run did, phase by phase; the JSON names are what
// percolator index --json prints.
type JobSummary struct {
	// Loading: the files listed, what Sync did with them, the bad files
	// (Bad; a caller prints them as it prints paths), and how long the
	// listing (with the observers' registration) and the load took.
	// Skipped counts the files Select did not choose, by extension
	// (Listing.Skipped).
	Files     int            `json:"files"`
	Skipped   map[string]int `json:"skipped_by_type"`
	New       int            `json:"new"`
	Changed   int            `json:"changed"`
	Deleted   int            `json:"deleted"`
	Unchanged int            `json:"unchanged"`
	Read      int            `json:"read"`
	Bad       []BadFile      `json:"-"`
	ScanTime  time.Duration  `json:"scan_ns"`
	LoadTime  time.Duration  `json:"load_ns"`
	// Observers: the runs of each observer, the scanners and the time
	// they took; the quarantined notifications, the observers' status
	// after the run (Observers), and the notifications left for
	// observers this process does not run (Unhandled).
	Runs        map[string]int64           `json:"observer_runs"`
	Scanners    int                        `json:"scanners"`
	RunTime     time.Duration              `json:"observers_ns"`
	Quarantined int                        `json:"quarantined"`
	Observers   *percolator.ObserverStatus `json:"-"`
	Unhandled   []observer.Unhandled       `json:"-"`
	// Counting: the index's counts and how long folding them took.
	Documents int64         `json:"documents"`
	Terms     int64         `json:"terms"`
	Clusters  int64         `json:"duplicate_clusters"`
	CountTime time.Duration `json:"count_ns"`
	// Verifying: the index equals a batch build of the files loaded.
	Verified bool `json:"verified,omitempty"`
}

// TotalRuns is the observer runs of every observer.
func (s JobSummary) TotalRuns() int64 {
	var n int64
	for _, r := range s.Runs {
		n += r
	}
	return n
}

// job is one run of the index job.
type job struct {
	db   *percolator.DB
	opts JobOptions
	sum  JobSummary

	files []File
	bad   []BadFile // the bad files Sync reported
}

// RunJob is the index job on db: it lists opts.Src and loads what
// changed (Sync), runs the observers (Register) to quiescence, folds the
// counts (CountIndex) and, with Verify, compares the index with a batch
// build of the files. It returns what each phase did, as far as it got.
// A bad glob in opts.Select (ErrBadGlob) is refused before anything is
// done.
func RunJob(ctx context.Context, db *percolator.DB, opts JobOptions) (JobSummary, error) {
	opts.EnsureDefaults()
	if err := opts.Select.Validate(); err != nil {
		return JobSummary{}, err
	}
	if opts.Report == nil {
		opts.Report = noReport{}
	}
	j := &job{db: db, opts: opts}
	phases := []struct {
		name string
		run  func(context.Context) error
	}{{PhaseLoading, j.load}, {PhaseObservers, j.observe}, {PhaseCounting, j.count}, {PhaseVerifying, j.verify}}
	for _, p := range phases {
		if p.name == PhaseVerifying && !opts.Verify {
			break
		}
		opts.Report.Start(p.name)
		err := p.run(ctx)
		opts.Report.End(p.name, j.sum, err)
		if err != nil {
			return j.sum, err
		}
	}
	return j.sum, nil
}

// load lists the source directory and loads what changed.
func (j *job) load(ctx context.Context) error {
	start := time.Now()
	j.progress(PhaseLoading, StepListing, 0, TotalUnknown, "")
	list, err := listDir(j.opts.Src, j.opts.Select, func(n int) { j.progress(PhaseLoading, StepListing, int64(n), TotalUnknown, "") })
	if err != nil {
		return err
	}
	files, bad := list.Files, list.Bad
	j.files, j.sum.Skipped = files, list.Skipped
	if err := Register(ctx, j.db); err != nil {
		return err
	}
	j.sum.ScanTime = time.Since(start)
	opts := SyncOptions{MaxFileSize: j.opts.MaxFileSize, Rehash: j.opts.Rehash, AllowDeletes: j.opts.AllowDeletes,
		ReadIndexed: func(n int64) { j.progress(PhaseLoading, StepComparing, n, TotalUnknown, "") }}
	opts.Load.Concurrency = j.opts.Loaders
	opts.Load.Progress = func(done, total int) {
		j.progress(PhaseLoading, StepLoading, int64(done), int64(total), "")
	}
	start = time.Now()
	st, err := Sync(ctx, j.db, files, bad, opts)
	j.bad, j.sum.Bad = st.Bad, st.Bad
	if err != nil {
		return err
	}
	j.sum.Files, j.sum.New, j.sum.Changed, j.sum.Deleted = len(files), st.New, st.Changed, st.Deleted
	j.sum.Unchanged, j.sum.Read, j.sum.LoadTime = st.Unchanged, st.Read, time.Since(start)
	return nil
}

// observe runs the observers to quiescence, reporting their progress.
func (j *job) observe(ctx context.Context) error {
	before, err := j.db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	j.opts.Report.Progress(observersProgress(before, before))
	mon := startMonitor(ctx, j.db, before, j.opts.Report)
	rep, err := j.db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: j.opts.Scanners, Drain: true})
	mon.stop()
	if err != nil {
		return err
	}
	j.sum.Unhandled = rep.Unhandled
	j.sum.RunTime, j.sum.Scanners = time.Since(start), j.opts.Scanners
	after, err := j.db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	j.sum.Observers = &after
	j.opts.Report.Progress(observersProgress(before, after))
	j.sum.Runs, _ = diffRuns(before, after)
	j.sum.Quarantined = after.Quarantined
	return nil
}

// count folds what the observers changed into the summary counts.
func (j *job) count(ctx context.Context) error {
	start := time.Now()
	j.progress(PhaseCounting, StepCounting, 0, TotalUnknown, "")
	c, err := countIndex(ctx, j.db, func(n int64) { j.progress(PhaseCounting, StepCounting, n, TotalUnknown, "") })
	if err != nil {
		return err
	}
	j.sum.Documents, j.sum.Terms, j.sum.Clusters, j.sum.CountTime = c.Documents, c.Terms, c.Clusters, time.Since(start)
	return nil
}

// verify compares the index with a batch build of what it was given.
func (j *job) verify(ctx context.Context) error {
	j.progress(PhaseVerifying, StepExporting, 0, TotalUnknown, "")
	ix, err := export(ctx, j.db, func(n int64) { j.progress(PhaseVerifying, StepExporting, n, TotalUnknown, "") })
	if err != nil {
		return err
	}
	ref, unread, err := reference(ctx, j.db, j.files, j.bad, func(done, total int) {
		j.progress(PhaseVerifying, StepRereading, int64(done), int64(total), "")
	})
	switch {
	case err != nil:
		return err
	case len(unread) > 0:
		return &VerifyError{fmt.Sprintf("%q changed while verifying: %s", unread[0].Path, unread[0].Reason)}
	}
	if err := ix.Equal(BuildChosen(ref, j.opts.Select)); err != nil {
		return &VerifyError{fmt.Sprintf("the incremental index differs from a batch build: %v", err)}
	}
	if c := (Counts{Documents: j.sum.Documents, Terms: j.sum.Terms, Clusters: j.sum.Clusters}); ix.Counts() != c {
		return &VerifyError{fmt.Sprintf("the counts %d/%d/%d differ from the index's %+v", c.Documents, c.Terms, c.Clusters, ix.Counts())}
	}
	j.sum.Verified = true
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

type noReport struct{}

func (noReport) Start(string)                  {}
func (noReport) Progress(JobProgress)          {}
func (noReport) End(string, JobSummary, error) {}
