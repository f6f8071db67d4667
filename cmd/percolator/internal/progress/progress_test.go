package progress

import (
	"bytes"
	"testing"
)

// TestProgressPlainLines: off a terminal, progress prints plain lines, at
// most one per period and phase; quiet prints nothing.
func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, false)
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
	p.End()
	for i := range 10 {
		p.Count("cells", int64(i))
	}
	if got, want := b.String(), "cells: 0\n"; got != want {
		t.Fatalf("plain count %q, want %q", got, want)
	}
	b.Reset()
	q := New(&b, true)
	q.Show("loading", 1, 2)
	q.Count("cells", 1)
	q.End()
	if b.Len() != 0 {
		t.Fatalf("quiet progress printed %q", b.String())
	}
}
