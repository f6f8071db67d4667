package history

import "testing"

func incr(k string, x int64) []Mop { return []Mop{rd(k, x), {F: Write, Key: k, Arg: x + 1}} }

func incrFirst(k string) []Mop { return []Mop{rd(k), {F: Write, Key: k, Arg: 1}} }

func TestMonotonicValid(t *testing.T) {
	var b builder
	b.txn(1, OK, incrFirst("x")...)
	b.txn(2, Fail, incr("x", 1)...) // did not happen
	b.txn(3, Info, incr("x", 1)...) // happened
	b.invoke(4, "txn", rd("x"), rd("y"))
	b.txn(1, OK, incr("x", 2)...)
	b.complete(4, OK, "txn", rd("x", 1), rd("y")) // concurrent: may lag
	b.txn(4, OK, rd("x", 3), rd("y"))
	expectValid(t, CheckMonotonic(b.h))
}

func TestMonotonicAnomalies(t *testing.T) {
	cases := []struct {
		kind, want string
		hist       func(b *builder)
	}{
		{"lost-update", "T1 and T3 both wrote 1 to x", func(b *builder) {
			b.txn(1, OK, incrFirst("x")...)
			b.txn(2, OK, incrFirst("x")...)
		}},
		{"nonmonotonic", "T1 saw x = 2, then T3 read x = 1", func(b *builder) {
			b.txn(1, OK, rd("x", 2))
			b.txn(1, OK, rd("x", 1))
		}},
		{"nonmonotonic-realtime", "T1 saw x = 1, then T3 read x = 0", func(b *builder) {
			b.txn(1, OK, incrFirst("x")...)
			b.txn(2, OK, rd("x"))
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			c.hist(&b)
			expect(t, CheckMonotonic(b.h), c.kind, true, c.want)
		})
	}
}
