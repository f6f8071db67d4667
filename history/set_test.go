package history

import "testing"

func sadd(k string, v int64) Mop { return Mop{F: Add, Key: k, Arg: v} }

func TestSetValid(t *testing.T) {
	var b builder
	b.op(1, OK, "add", sadd("s", 1))
	b.op(2, Fail, "add", sadd("s", 2)) // never read
	b.op(3, Info, "add", sadd("s", 3)) // may appear
	b.invoke(1, "add", sadd("s", 4))
	b.op(2, OK, "read", rd("s", 1)) // concurrent with the add of 4
	b.complete(1, OK, "add", sadd("s", 4))
	b.op(2, OK, "read", rd("s", 1, 3, 4))
	b.op(2, OK, "read", rd("t"))
	expectValid(t, CheckSet(b.h))
}

func TestSetAnomalies(t *testing.T) {
	cases := []struct {
		kind, want string
		hist       func(b *builder)
	}{
		{"unexpected", "T1 read 9 in s, which no add added", func(b *builder) {
			b.op(1, OK, "read", rd("s", 9))
		}},
		{"unexpected", "T3 read 2 in s, whose add T1 failed", func(b *builder) {
			b.op(1, Fail, "add", sadd("s", 2))
			b.op(1, OK, "read", rd("s", 2))
		}},
		{"lost", "T1 added 1 to s; T5, invoked after, read s without it, and no later read has it", func(b *builder) {
			b.op(1, OK, "add", sadd("s", 1))
			b.op(2, OK, "read", rd("s", 1))
			b.op(2, OK, "read", rd("s"))
		}},
		{"stale", "T1 added 1 to s; T3, invoked after, read s without it, though a later read has it", func(b *builder) {
			b.op(1, OK, "add", sadd("s", 1))
			b.op(2, OK, "read", rd("s"))
			b.op(2, OK, "read", rd("s", 1))
		}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			var b builder
			c.hist(&b)
			expect(t, CheckSet(b.h), c.kind, true, c.want)
		})
	}
}
