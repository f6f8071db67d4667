package history

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func rread(k string, vs ...int64) Mop    { return rd(k, vs...) }
func rwrite(k string, v int64) Mop       { return Mop{F: Write, Key: k, Arg: v} }
func rcas(k string, expect, v int64) Mop { return Mop{F: CAS, Key: k, Expect: expect, Arg: v} }

func TestRegisterValid(t *testing.T) {
	var b builder
	b.op(1, OK, "read", rread("x"))
	b.op(1, OK, "write", rwrite("x", 1))
	b.op(2, Fail, "write", rwrite("x", 9)) // did not happen
	b.op(2, Fail, "cas", rcas("x", 1, 8))  // did not happen
	b.op(1, OK, "cas", rcas("x", 1, 2))
	b.op(2, Info, "read", rread("x", 7)) // tells nothing
	b.invoke(3, "write", rwrite("x", 3))
	b.op(1, OK, "read", rread("x", 2))
	b.op(1, OK, "read", rread("x", 3)) // the info write took effect
	b.op(4, OK, "write", rwrite("y", 1))
	r := CheckRegister(b.h, RegisterOptions{Timeout: time.Minute})
	expectValid(t, r)
	if r.HTML != nil {
		t.Error("HTML for a valid history")
	}
}

func TestRegisterNotLinearizable(t *testing.T) {
	cases := map[string]func(b *builder){
		"stale read": func(b *builder) {
			b.op(1, OK, "write", rwrite("x", 1))
			b.op(2, OK, "read", rread("x"))
		},
		"failed cas seen": func(b *builder) {
			b.op(1, OK, "write", rwrite("x", 1))
			b.op(1, Fail, "cas", rcas("x", 1, 5))
			b.op(2, OK, "read", rread("x", 5))
		},
		"ok cas from the wrong value": func(b *builder) {
			b.op(1, OK, "write", rwrite("x", 1))
			b.op(1, OK, "cas", rcas("x", 2, 5))
		},
	}
	for n, hist := range cases {
		t.Run(n, func(t *testing.T) {
			var b builder
			b.op(3, OK, "write", rwrite("y", 1))
			hist(&b)
			r := CheckRegister(b.h, RegisterOptions{})
			expect(t, r, "not-linearizable", true, "key x")
			if r.Counts["not-linearizable"] != 1 || !bytes.Contains(r.HTML, []byte("<html")) {
				t.Errorf("%s; HTML %d bytes", r.Summary(), len(r.HTML))
			}
		})
	}
}

func TestRegisterTimeoutIsInvalid(t *testing.T) {
	var b builder
	b.op(1, OK, "write", rwrite("x", 1))
	// The nanosecond is over before the first key's search starts.
	r := CheckRegister(b.h, RegisterOptions{Timeout: time.Nanosecond})
	expect(t, r, "unknown-linearizability", true, "timed out")
}

// TestRegisterRandom checks simulated linearizable histories pass, and
// that a read changed to a value never written is caught.
func TestRegisterRandom(t *testing.T) {
	base := seed(t)
	for i := range uint64(20) {
		h := registerSim(base+i, 5, 200)
		expectValid(t, CheckRegister(h, RegisterOptions{Timeout: time.Minute}))
		for j := range h {
			if h[j].Type == OK && h[j].F == "read" && len(h[j].Value[0].Read) == 1 {
				h[j].Value = []Mop{rread(h[j].Value[0].Key, -1)}
				break
			}
		}
		if r := CheckRegister(h, RegisterOptions{Timeout: time.Minute}); r.Valid {
			t.Errorf("seed %d: a read of a value never written passed", base+i)
		}
	}
}

// registerSim generates a register history over two keys: each operation
// takes effect at once between its invocation and completion.
func registerSim(seed uint64, procs, n int) []Op {
	rng := rand.New(rand.NewPCG(seed, seed))
	var b builder
	vals := map[string]regState{}
	type pending struct {
		f       string
		m       Mop
		applied bool
		out     Type
	}
	ps := make([]*pending, procs)
	ids := make([]int, procs)
	for i := range ids {
		ids[i] = i
	}
	for started := 0; started < n || anyPending(ps); {
		i := rng.IntN(procs)
		p := ps[i]
		switch {
		case p == nil && started < n:
			started++
			p = &pending{out: OK}
			k := fmt.Sprintf("k%d", rng.IntN(2))
			switch rng.IntN(3) {
			case 0:
				p.f, p.m = "read", Mop{F: Read, Key: k}
			case 1:
				p.f, p.m = "write", rwrite(k, int64(started))
			default:
				p.f, p.m = "cas", rcas(k, int64(rng.IntN(started)), int64(started))
			}
			ps[i] = p
			b.invoke(ids[i], p.f, p.m)
		case p == nil:
		case !p.applied:
			p.applied = true
			s := vals[p.m.Key]
			switch {
			case rng.IntN(20) == 0:
				p.out = Info
				if rng.IntN(2) == 0 {
					break
				}
				fallthrough
			default:
				switch p.f {
				case "read":
					p.m.Read = []int64{}
					if s.set {
						p.m.Read = []int64{s.value}
					}
				case "write":
					vals[p.m.Key] = regState{true, p.m.Arg}
				case "cas":
					if s == (regState{true, p.m.Expect}) {
						vals[p.m.Key] = regState{true, p.m.Arg}
					} else if p.out == OK {
						p.out = Fail
					}
				}
			}
		default:
			b.complete(ids[i], p.out, p.f, p.m)
			if p.out == Info {
				ids[i] += procs
			}
			ps[i] = nil
		}
	}
	return b.h
}

func anyPending[T any](ps []*T) bool {
	for _, p := range ps {
		if p != nil {
			return true
		}
	}
	return false
}
