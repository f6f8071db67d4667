package history

import "testing"

func TestListAppendValid(t *testing.T) {
	var b builder
	b.txn(1, OK, ap("x", 1), rd("x", 1))
	b.txn(2, Fail, ap("x", 2)) // never seen: fine
	b.txn(3, Info, ap("x", 3)) // seen below: committed
	b.txn(4, Info, ap("y", 9)) // never seen: left out
	b.txn(5, OK, rd("x", 1, 3), ap("y", 1), rd("y", 1))
	b.invoke(6, "txn", rd("x")) // never completes
	r := CheckListAppend(b.h, ListAppendOptions{RealTime: true})
	expectValid(t, r)
	if r.OK != 2 || r.Fail != 1 || r.Info != 3 {
		t.Errorf("outcomes: %s", r.Summary())
	}
}

func TestListAppendG0(t *testing.T) {
	var b builder
	b.txn(1, OK, ap("x", 1), ap("y", 1))
	b.txn(2, OK, ap("x", 2), ap("y", 2))
	b.txn(3, OK, rd("x", 1, 2), rd("y", 2, 1))
	a := expect(t, CheckListAppend(b.h, ListAppendOptions{}), "G0", true, "T1 -ww(", "T3 -ww(", "-> T1")
	if len(a.Ops) != 2 {
		t.Errorf("G0 ops %v", a.Ops)
	}
}

func TestListAppendG1c(t *testing.T) {
	var b builder
	b.invoke(1, "txn", ap("x", 1), rd("y"))
	b.invoke(2, "txn", ap("y", 1), rd("x"))
	b.complete(1, OK, "txn", ap("x", 1), rd("y", 1))
	b.complete(2, OK, "txn", ap("y", 1), rd("x", 1))
	expect(t, CheckListAppend(b.h, ListAppendOptions{}), "G1c", true, "-wr(x)->", "-wr(y)->")
}

func TestListAppendGSingle(t *testing.T) {
	var b builder
	b.invoke(1, "txn", rd("x"), rd("y"))
	b.txn(2, OK, ap("x", 1), ap("y", 1))
	b.complete(1, OK, "txn", rd("x"), rd("y", 1)) // read skew
	b.txn(3, OK, rd("x", 1))
	expect(t, CheckListAppend(b.h, ListAppendOptions{}), "G-single", true, "T3 -rw(x)-> T2 -wr(y)-> T3")
}

func TestListAppendGNonadjacent(t *testing.T) {
	var b builder
	for p := 1; p <= 4; p++ {
		b.invoke(p, "txn")
	}
	b.complete(1, OK, "txn", rd("x"), rd("b", 1))
	b.complete(2, OK, "txn", ap("x", 1), ap("a", 1))
	b.complete(3, OK, "txn", rd("a", 1), rd("y"))
	b.complete(4, OK, "txn", ap("y", 1), ap("b", 1))
	b.txn(5, OK, rd("x", 1), rd("y", 1))
	a := expect(t, CheckListAppend(b.h, ListAppendOptions{RealTime: true}), "G-nonadjacent", true, "-rw(x)->", "-wr(a)->", "-rw(y)->", "-wr(b)->")
	if len(a.Ops) != 4 {
		t.Errorf("ops %v", a.Ops)
	}
}

func TestListAppendG2Allowed(t *testing.T) {
	var b builder
	b.invoke(1, "txn", rd("x"), ap("y", 1))
	b.invoke(2, "txn", rd("y"), ap("x", 1))
	b.complete(1, OK, "txn", rd("x"), ap("y", 1))
	b.complete(2, OK, "txn", rd("y"), ap("x", 1))
	b.txn(3, OK, rd("x", 1), rd("y", 1))
	r := CheckListAppend(b.h, ListAppendOptions{RealTime: true})
	expect(t, r, "G2", false, "-rw(x)->", "-rw(y)->")
	expectValid(t, r)
}

func TestListAppendRealTime(t *testing.T) {
	cases := []struct {
		kind string
		hist func(b *builder)
	}{
		{"G-single-realtime", func(b *builder) { // stale read
			b.txn(1, OK, ap("x", 1))
			b.txn(2, OK, rd("x"))
			b.txn(3, OK, rd("x", 1))
		}},
		{"G0-realtime", func(b *builder) { // a later write ordered first
			b.txn(1, OK, ap("x", 2))
			b.txn(2, OK, ap("x", 1))
			b.txn(3, OK, rd("x", 1, 2))
		}},
		{"G-nonadjacent-realtime", func(b *builder) {
			b.invoke(2, "txn")
			b.invoke(3, "txn")
			b.invoke(4, "txn")
			b.complete(4, OK, "txn", ap("y", 1))
			b.invoke(1, "txn")
			b.complete(2, OK, "txn", ap("x", 1), ap("z", 1))
			b.complete(3, OK, "txn", rd("z", 1), rd("y"))
			b.complete(1, OK, "txn", rd("x"))
			b.txn(5, OK, rd("x", 1), rd("y", 1))
		}},
		{"G1c-realtime", func(b *builder) { // read from the future
			b.txn(1, OK, rd("x", 1))
			b.txn(2, OK, ap("x", 1))
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			c.hist(&b)
			expectValid(t, CheckListAppend(b.h, ListAppendOptions{}))
			expect(t, CheckListAppend(b.h, ListAppendOptions{RealTime: true}), c.kind, true, "-rt->")
		})
	}
}

func TestListAppendDirect(t *testing.T) {
	cases := []struct {
		kind string
		want string
		hist func(b *builder)
	}{
		{"G1a", "T2 read 1 in x, appended by T3, which failed", func(b *builder) {
			b.invoke(1, "txn", ap("x", 1))
			b.txn(2, OK, rd("x", 1))
			b.complete(1, Fail, "txn", ap("x", 1))
		}},
		{"G1b", "T3 read x = [1], ending in 1, an intermediate append of T1", func(b *builder) {
			b.txn(1, OK, ap("x", 1), ap("x", 2))
			b.txn(2, OK, rd("x", 1))
		}},
		{"internal", "T1 read x = [1], expected [1 2]", func(b *builder) {
			b.txn(1, OK, rd("x", 1), ap("x", 2), rd("x", 1))
		}},
		{"incompatible-order", "T3 read x = [2 1], not a prefix of the longest read [1 2]", func(b *builder) {
			b.txn(1, OK, ap("x", 1), ap("x", 2), rd("x", 1, 2))
			b.txn(2, OK, rd("x", 2, 1))
		}},
		{"duplicate-elements", "T3 read 1 twice in x", func(b *builder) {
			b.txn(1, OK, ap("x", 1))
			b.txn(2, OK, rd("x", 1, 1))
		}},
		{"lost-update", "T1, T3 read the same version of x", func(b *builder) {
			b.txn(1, OK, rd("x"), ap("x", 1))
			b.txn(2, OK, rd("x"), ap("x", 2))
			b.txn(3, OK, rd("x", 1, 2))
		}},
		{"unexpected", "T1 read 7 in x, which no transaction appended", func(b *builder) {
			b.txn(1, OK, rd("x", 7))
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			c.hist(&b)
			expect(t, CheckListAppend(b.h, ListAppendOptions{}), c.kind, true, c.want)
		})
	}
}

func TestListAppendMalformed(t *testing.T) {
	var b builder
	b.complete(1, OK, "txn", rd("x"))
	expect(t, CheckListAppend(b.h, ListAppendOptions{}), "malformed", true, "no invocation")
}

// TestListAppendMostSevere: a component holding write skew (G2) and a
// G-single cycle is reported as G-single.
func TestListAppendMostSevere(t *testing.T) {
	var b builder
	for p := 1; p <= 3; p++ {
		b.invoke(p, "txn")
	}
	b.complete(1, OK, "txn", rd("x"), ap("y", 1), rd("w", 1))
	b.complete(2, OK, "txn", ap("x", 1), rd("y"), ap("z", 1))
	b.complete(3, OK, "txn", rd("z", 1), ap("w", 1))
	b.txn(4, OK, rd("x", 1), rd("y", 1))
	r := CheckListAppend(b.h, ListAppendOptions{})
	expect(t, r, "G-single", true, "-rw(x)->", "-wr(z)->", "-wr(w)->")
	if r.Counts["G2"] != 0 {
		t.Errorf("G2 reported too: %s", r.Summary())
	}
}

// TestRealTimeFrontier: a serial history of n transactions gets n-1
// real-time edges, not n(n-1)/2.
func TestRealTimeFrontier(t *testing.T) {
	var b builder
	const n = 200
	for i := range n {
		b.txn(i, OK, ap("x", int64(i)))
	}
	pairs, err := Pairs(b.h)
	if err != nil {
		t.Fatal(err)
	}
	g := newListAppend(pairs).graph(true)
	edges := 0
	for _, es := range g.adj {
		edges += len(es)
	}
	if edges != n-1 {
		t.Errorf("%d real-time edges, want %d", edges, n-1)
	}
}
