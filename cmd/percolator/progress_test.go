package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

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
		p.show("loading", int64(i), 100)
	}
	p.end()
	p.show("observers: 5 notifications left, 10 runs/s", 3, 8)
	if got, want := b.String(), "loading: 0/100\nobservers: 5 notifications left, 10 runs/s: 3/8\n"; got != want {
		t.Fatalf("plain progress %q, want %q", got, want)
	}
	b.Reset()
	q := newProgress(&b, true)
	q.show("loading", 1, 2)
	q.end()
	if b.Len() != 0 {
		t.Fatalf("quiet progress printed %q", b.String())
	}
}

// TestObserverProgress: a reading of the observers' progress shows the
// notifications left and the run rate, and publishes them.
func TestObserverProgress(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := docindex.Register(ctx, db); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"a.txt": []byte("a"), "b.txt": []byte("b"), "c.txt": []byte("c")}
	if _, err := docindex.Sync(ctx, db, docindex.MemFiles(files), nil, docindex.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := db.ObserverStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	pub := startPublishing(dir, []string{"index", "test"})
	pollObservers(ctx, db, before, time.Now().Add(-time.Second), newProgress(&b, false), pub)
	pub.finish(nil)
	if !regexp.MustCompile(`^observers: 3 notifications left, 0 runs/s: 0/3\n$`).MatchString(b.String()) {
		t.Fatalf("progress %q", b.String())
	}
	p, err := readPublished(dir)
	if err != nil || p.Observers == nil || !strings.Contains(p.Progress, "3 notifications left") || !p.Finished {
		t.Fatalf("published %+v, %v", p, err)
	}
}
