package history

import (
	"strings"
	"testing"
)

// builder writes histories by hand: each event at the next tick.
type builder struct {
	h    []Op
	tick int64
}

func (b *builder) event(p int, t Type, f string, ms []Mop) {
	b.tick += 10
	b.h = append(b.h, Op{Index: len(b.h), Process: p, Type: t, F: f, Time: b.tick, Value: ms})
}

// invoke records an invocation: ms with reads unknown.
func (b *builder) invoke(p int, f string, ms ...Mop) {
	b.event(p, Invoke, f, unread(ms))
}

// complete records a completion; only an ok one knows its reads.
func (b *builder) complete(p int, t Type, f string, ms ...Mop) {
	if t != OK {
		ms = unread(ms)
	}
	b.event(p, t, f, ms)
}

// op records an operation invoked and completed before the next one.
func (b *builder) op(p int, t Type, f string, ms ...Mop) {
	b.invoke(p, f, ms...)
	b.complete(p, t, f, ms...)
}

func (b *builder) txn(p int, t Type, ms ...Mop) { b.op(p, t, "txn", ms...) }

func unread(ms []Mop) []Mop {
	out := make([]Mop, len(ms))
	for i, m := range ms {
		m.Read = nil
		out[i] = m
	}
	return out
}

func ap(k string, v int64) Mop { return Mop{F: Append, Key: k, Arg: v} }

// rd is a read of k that returned vs ([] when none).
func rd(k string, vs ...int64) Mop {
	if vs == nil {
		vs = []int64{}
	}
	return Mop{F: Read, Key: k, Read: vs}
}

// expect checks that r found an anomaly of kind with the forbidden flag
// and an explanation containing each of want.
func expect(t *testing.T, r Result, kind string, forbidden bool, want ...string) Anomaly {
	t.Helper()
	for _, a := range r.Anomalies {
		if a.Kind != kind {
			continue
		}
		if a.Forbidden != forbidden {
			t.Errorf("%s: forbidden %v, want %v", kind, a.Forbidden, forbidden)
		}
		if r.Valid == forbidden {
			t.Errorf("%s: Valid %v with forbidden %v", kind, r.Valid, forbidden)
		}
		for _, w := range want {
			if !strings.Contains(a.Explanation, w) {
				t.Errorf("%s: explanation %q does not name %q", kind, a.Explanation, w)
			}
		}
		if len(a.Ops) == 0 && kind != "malformed" {
			t.Errorf("%s: no operations", kind)
		}
		return a
	}
	t.Fatalf("no %s anomaly: %s\n%+v", kind, r.Summary(), r.Anomalies)
	return Anomaly{}
}

// expectValid checks that r found nothing forbidden nor of the kinds
// given.
func expectValid(t *testing.T, r Result, none ...string) {
	t.Helper()
	if !r.Valid {
		t.Fatalf("invalid: %s\n%+v", r.Summary(), r.Anomalies)
	}
	for _, k := range none {
		if r.Counts[k] > 0 {
			t.Errorf("%s found: %s", k, r.Summary())
		}
	}
}
