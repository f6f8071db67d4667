package view

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/docindex"
)

// TestIndexReportProgress: the index job's progress is shown (each
// step a phase of the meter, with its count and detail, ended with its
// phase) and published with the observers' status.
func TestIndexReportProgress(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	pub := runstatus.Start(dir, []string{"index", "test"})
	rep := &IndexReport{Target: "--dir " + dir, Pub: pub, Prog: progress.New(context.Background(), &b, false), Out: &b, JSON: true}
	line := "observers: runs 0, 3 notifications left"
	rep.Start(docindex.PhaseObservers)
	rep.Progress(docindex.JobProgress{Phase: docindex.PhaseObservers, Step: docindex.StepObservers, Done: 0, Total: docindex.TotalUnknown,
		Detail: "3 notifications left", Words: line, Observers: &percolator.ObserverStatus{}})
	rep.End(docindex.PhaseObservers, docindex.JobSummary{}, context.Canceled)
	pub.Finish(nil)
	want := "observers: runs: 0\nobservers: runs: stopped at 0 (3 notifications left) after "
	if got := b.String(); !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 2 {
		t.Fatalf("progress %q, want %q and the time", got, want)
	}
	p, err := runstatus.Read(dir)
	if err != nil || p.Observers == nil || p.Progress != line || !p.Finished {
		t.Fatalf("published %+v, %v", p, err)
	}
}

// TestIndexReportSkipped: the loading summary counts the files skipped by
// type, the most first (ties by extension), "(none)" for no extension, a
// name that is not UTF-8 quoted, and the types past maxTypesShown summed.
func TestIndexReportSkipped(t *testing.T) {
	var b bytes.Buffer
	pub := runstatus.Start(t.TempDir(), []string{"index", "test"})
	defer pub.Finish(nil)
	rep := &IndexReport{Pub: pub, Prog: progress.New(context.Background(), &b, true), Out: &b}
	skipped := map[string]int{".go": 1402, "": 12, ".mod": 3, ".\xff": 2}
	for i := range 9 {
		skipped[fmt.Sprintf(".x%d", i)] = 1
	}
	rep.End(docindex.PhaseLoading, docindex.JobSummary{Files: 1, Skipped: skipped}, nil)
	want := `skipped:   1428 files by type: .go 1402, (none) 12, .mod 3, ".\xff" 2, .x0 1, .x1 1, .x2 1, .x3 1, .x4 1, .x5 1, and 3 of 3 other types` + "\n"
	if _, line, _ := strings.Cut(b.String(), "\n"); line != want {
		t.Fatalf("summary:\n%s\nwant the line\n%s", b.String(), want)
	}
	b.Reset()
	rep.End(docindex.PhaseLoading, docindex.JobSummary{Files: 1, Skipped: map[string]int{}}, nil)
	if strings.Contains(b.String(), "skipped") {
		t.Fatalf("nothing skipped, yet:\n%s", b.String())
	}
}
