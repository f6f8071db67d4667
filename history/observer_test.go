package history

import "testing"

// processed is observer's final read of what the runs of k processed.
func processed(k string, vs ...int64) Mop {
	if vs == nil {
		vs = []int64{}
	}
	return Mop{F: Processed, Key: k, Read: vs}
}

func TestObserverValid(t *testing.T) {
	var b builder
	b.op(1, OK, "append", ap("a", 1))
	b.op(1, OK, "append", ap("a", 2))
	b.op(2, Fail, "append", ap("a", 3)) // never seen
	b.op(2, Info, "append", ap("a", 4)) // may appear
	b.op(3, OK, "append", ap("b", 5))
	b.op(4, Info, "append", ap("c", 6)) // may be missing
	// a's runs: one after 1, one after 2 and 4 (collapsed); b's one run.
	b.op(9, OK, "final", rd("a", 1, 2, 4), processed("a", 1, 4), rd("b", 5), processed("b", 5), rd("c"), processed("c"))
	r := CheckObserver(b.h)
	expectValid(t, r)
	if r.Counts["changes"] != 4 || r.Counts["runs"] != 3 {
		t.Errorf("counts %v, want 4 changes, 3 runs", r.Counts)
	}
}

func TestObserverAnomalies(t *testing.T) {
	cases := []struct {
		kind, want string
		final      []Mop
	}{
		{"unprocessed", "no observer run of a followed its last change (2)", []Mop{rd("a", 1, 2), processed("a", 1)}},
		{"unprocessed", "no observer run of a followed its last change (1)", []Mop{rd("a", 1), processed("a")}},
		{"duplicate-run", "two observer runs of a committed for one change (1)", []Mop{rd("a", 1, 2), processed("a", 1, 1, 2)}},
		{"out-of-order-run", "saw 1 last, older than what a run committed before it saw", []Mop{rd("a", 1, 2), processed("a", 2, 1, 2)}},
		{"unexpected-run", "saw 7 last, which is not in the list", []Mop{rd("a", 1, 2), processed("a", 7, 2)}},
		{"unexpected", "read 3 in a's list, whose append T5 failed", []Mop{rd("a", 1, 2, 3), processed("a", 3)}},
		{"unexpected", "read 8 in a's list, which no append appended", []Mop{rd("a", 1, 2, 8), processed("a", 8)}},
		{"lost", "T3 appended 2 to a, and the final read", []Mop{rd("a", 1), processed("a", 1)}},
		{"duplicate-elements", "read 1 twice in a's list", []Mop{rd("a", 1, 2, 1), processed("a", 1)}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			b.op(1, OK, "append", ap("a", 1))
			b.op(1, OK, "append", ap("a", 2))
			b.op(1, Fail, "append", ap("a", 3))
			b.op(9, OK, "final", c.final...)
			expect(t, CheckObserver(b.h), c.kind, true, c.want)
		})
	}
}

func TestObserverNoFinalRead(t *testing.T) {
	var b builder
	b.op(1, OK, "append", ap("a", 1))
	r := CheckObserver(b.h)
	if r.Counts["no-final-read"] != 1 {
		t.Errorf("counts %v, want no-final-read", r.Counts)
	}
}
