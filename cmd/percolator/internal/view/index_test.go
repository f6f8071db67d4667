package view

import (
	"bytes"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/docindex"
)

// TestIndexReportProgress: the index job's progress is shown (the
// observers' line, done of total) and published with the observers'
// status.
func TestIndexReportProgress(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	pub := runstatus.Start(dir, []string{"index", "test"})
	rep := &IndexReport{Target: "--dir " + dir, Pub: pub, Prog: progress.New(&b, false), Out: &b}
	line := "observers: 3 notifications left, 0 runs/s"
	rep.Start(docindex.PhaseObservers)
	rep.Progress(docindex.JobProgress{Phase: docindex.PhaseObservers, Done: 0, Total: 3, Label: line, Words: line, Observers: &percolator.ObserverStatus{}})
	pub.Finish(nil)
	if got := b.String(); got != line+": 0/3\n" {
		t.Fatalf("progress %q", got)
	}
	p, err := runstatus.Read(dir)
	if err != nil || p.Observers == nil || p.Progress != line || !p.Finished {
		t.Fatalf("published %+v, %v", p, err)
	}
}
