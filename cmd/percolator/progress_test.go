package main

import (
	"bytes"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
)

// TestProgressPlainLines: off a terminal, progress prints plain lines, at
// most one per period and phase; quiet prints nothing.
func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, false)
	if p.tty {
		t.Fatal("a buffer is not a terminal")
	}
	for i := range 100 {
		p.Show("loading", int64(i), 100)
	}
	p.End()
	p.Show("observers: 5 notifications left, 10 runs/s", 3, 8)
	if got, want := b.String(), "loading: 0/100\nobservers: 5 notifications left, 10 runs/s: 3/8\n"; got != want {
		t.Fatalf("plain progress %q, want %q", got, want)
	}
	b.Reset()
	q := newProgress(&b, true)
	q.Show("loading", 1, 2)
	q.End()
	if b.Len() != 0 {
		t.Fatalf("quiet progress printed %q", b.String())
	}
}

// TestIndexReportProgress: the index job's progress is shown (the
// observers' line, done of total) and published with the observers'
// status.
func TestIndexReportProgress(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	pub := startPublishing(dir, []string{"index", "test"})
	rep := &indexReport{tg: &target{dir: dir}, pub: pub, prog: newProgress(&b, false), out: &b}
	line := "observers: 3 notifications left, 0 runs/s"
	rep.Start(docindex.PhaseObservers)
	rep.Progress(docindex.JobProgress{Phase: docindex.PhaseObservers, Done: 0, Total: 3, Label: line, Words: line, Observers: &percolator.ObserverStatus{}})
	pub.finish(nil)
	if got := b.String(); got != line+": 0/3\n" {
		t.Fatalf("progress %q", got)
	}
	p, err := readPublished(dir)
	if err != nil || p.Observers == nil || p.Progress != line || !p.Finished {
		t.Fatalf("published %+v, %v", p, err)
	}
}
