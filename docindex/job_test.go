package docindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

// recordReport records what a run reports, and checks its progress:
// each step starts at 0 and keeps the total it started with, which its
// count never passes.
type recordReport struct {
	mu     sync.Mutex
	events []string
	ends   map[string]error
	steps  []string
	totals map[string]int64 // by step
}

func (r *recordReport) Start(phase string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "start "+phase)
}

func (r *recordReport) Progress(p JobProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.totals == nil {
		r.totals = map[string]int64{}
	}
	total, seen := r.totals[p.Step]
	switch {
	case p.Phase == "" || p.Step == "" || (p.Total != TotalUnknown && p.Done > p.Total):
		panic(fmt.Sprintf("progress %+v", p))
	case !seen && p.Done != 0:
		panic(fmt.Sprintf("step %q did not start at 0: %+v", p.Step, p))
	case seen && total != p.Total:
		panic(fmt.Sprintf("step %q changed its total from %d: %+v", p.Step, total, p))
	case !seen:
		r.steps = append(r.steps, p.Step)
		r.totals[p.Step] = p.Total
	}
}

func (r *recordReport) End(phase string, _ JobSummary, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "end "+phase)
	if r.ends == nil {
		r.ends = map[string]error{}
	}
	r.ends[phase] = err
}

// writeFiles writes files into dir, a day old (so that no rerun reads them
// again for having changed too recently to trust their stat).
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	day := time.Now().Add(-24 * time.Hour)
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, day, day); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunJob: a run goes through its phases in order, reporting each,
// loads every file, verifies and counts; a rerun with no change reads
// nothing and runs no observer; a file over the size limit is a bad file,
// and the rest are indexed.
func TestRunJob(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "alpha beta", "b.html": "<title>B</title><a href=a.txt>a</a> beta", "c.txt": "alpha beta"})
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep := &recordReport{}
	sum, err := RunJob(ctx, db, JobOptions{Src: src, Verify: true, Report: rep})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start loading", "end loading", "start observers", "end observers", "start counting", "end counting", "start verifying", "end verifying"}
	if !slices.Equal(rep.events, want) {
		t.Fatalf("reported %q, want %q", rep.events, want)
	}
	if want := []string{StepListing, StepComparing, StepLoading, StepObservers, StepCounting, StepExporting, StepRereading}; !slices.Equal(rep.steps, want) {
		t.Fatalf("reported the steps %q, want %q", rep.steps, want)
	}
	if sum.Files != 3 || sum.New != 3 || !sum.Verified || sum.Documents != 3 || sum.Clusters != 1 || sum.TotalRuns() == 0 || sum.Observers == nil || sum.Scanners != 4 {
		t.Fatalf("first run: %+v", sum)
	}
	sum, err = RunJob(ctx, db, JobOptions{Src: src})
	if err != nil || sum.Unchanged != 3 || sum.Read != 0 || sum.TotalRuns() != 0 || sum.Verified {
		t.Fatalf("rerun: %+v, %v", sum, err)
	}
	writeFiles(t, src, map[string]string{"big.txt": strings.Repeat("x ", 100), "d.txt": "delta"})
	sum, err = RunJob(ctx, db, JobOptions{Src: src, MaxFileSize: 50, Verify: true})
	if err != nil || len(sum.Bad) != 1 || sum.Bad[0].Path != "big.txt" || sum.New != 1 || !sum.Verified {
		t.Fatalf("run with a file over the limit: %+v, %v", sum, err)
	}
}

// TestRunJobRefusesDeletes: a run that would delete most documents fails
// in its loading phase (ErrTooManyDeletes), and reports it there.
func TestRunJobRefusesDeletes(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"})
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := RunJob(ctx, db, JobOptions{Src: src}); err != nil {
		t.Fatal(err)
	}
	rep := &recordReport{}
	_, err = RunJob(ctx, db, JobOptions{Src: t.TempDir(), Report: rep})
	if !errors.Is(err, ErrTooManyDeletes) || !slices.Equal(rep.events, []string{"start loading", "end loading"}) || !errors.Is(rep.ends[PhaseLoading], ErrTooManyDeletes) {
		t.Fatalf("run on an empty directory: %v, reported %q %v", err, rep.events, rep.ends)
	}
}

// TestObserverProgress: a reading of the observers' progress gives the
// runs so far, of a total no one knows, the notifications left, and the
// status it read.
func TestObserverProgress(t *testing.T) {
	ctx := context.Background()
	db := openIndex(t, t.TempDir())
	defer db.Close()
	files := map[string][]byte{"a.txt": []byte("a"), "b.txt": []byte("b"), "c.txt": []byte("c")}
	if _, err := Sync(ctx, db, MemFiles(files), nil, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := db.ObserverStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pollObservers(ctx, db, before)
	if err != nil || p.Words != "observers: runs 0, 3 notifications left" || p.Detail != "3 notifications left" || p.Step != StepObservers ||
		p.Done != 0 || p.Total != TotalUnknown || p.Observers == nil || p.Phase != PhaseObservers {
		t.Fatalf("progress %+v, %v", p, err)
	}
}
