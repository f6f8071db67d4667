package history

import "testing"

func lfWrite(k string) Mop { return Mop{F: Write, Key: k, Arg: 1} }

func TestLongForkValid(t *testing.T) {
	var b builder
	b.txn(1, OK, lfWrite("x"))
	b.txn(2, Fail, lfWrite("y")) // never seen
	b.txn(3, Info, lfWrite("z")) // seen
	b.txn(4, OK, rd("x", 1), rd("y"), rd("z"))
	b.txn(4, OK, rd("x", 1), rd("y"), rd("z", 1))
	b.txn(5, OK, rd("x", 1), rd("z", 1))
	b.txn(5, OK, rd("x"), rd("w")) // saw less, but comparably: no fork
	expectValid(t, CheckLongFork(b.h))
}

func TestLongForkAnomalies(t *testing.T) {
	cases := []struct {
		kind, want string
		hist       func(b *builder)
	}{
		{"long-fork", "T5 saw writes of [x] that T7 did not, and T7 saw writes of [y] that T5 did not", func(b *builder) {
			b.txn(1, OK, lfWrite("x"))
			b.txn(2, OK, lfWrite("y"))
			b.txn(3, OK, rd("x", 1), rd("y"))
			b.txn(4, OK, rd("x"), rd("y", 1))
		}},
		{"G1a", "T3 saw x written by T1, which failed", func(b *builder) {
			b.txn(1, Fail, lfWrite("x"))
			b.txn(2, OK, rd("x", 1), rd("y"))
		}},
		{"unexpected", "T1 saw q written, which no transaction wrote", func(b *builder) {
			b.txn(2, OK, rd("q", 1))
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			c.hist(&b)
			expect(t, CheckLongFork(b.h), c.kind, true, c.want)
		})
	}
}
