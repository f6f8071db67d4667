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

// regSim generates a register history over two keys: each operation
// takes effect at once between its invocation and completion.
type regSim struct {
	rng   *rand.Rand
	b     builder
	vals  map[string]regState
	procs []*regPending // nil when idle
	ids   []int
}

type regPending struct {
	f       string
	m       Mop
	applied bool
	out     Type
}

func registerSim(seed uint64, procs, n int) []Op {
	s := &regSim{rng: rand.New(rand.NewPCG(seed, seed)), vals: map[string]regState{}, procs: make([]*regPending, procs)}
	for i := range procs {
		s.ids = append(s.ids, i)
	}
	for started := 0; started < n || anyPending(s.procs); {
		i := s.rng.IntN(procs)
		switch p := s.procs[i]; {
		case p == nil && started < n:
			started++
			s.invoke(i, int64(started))
		case p == nil:
		case !p.applied:
			s.apply(p)
		default:
			s.complete(i, p)
		}
	}
	return s.b.h
}

func (s *regSim) invoke(i int, v int64) {
	p := &regPending{out: OK}
	k := fmt.Sprintf("k%d", s.rng.IntN(2))
	switch s.rng.IntN(3) {
	case 0:
		p.f, p.m = "read", Mop{F: Read, Key: k}
	case 1:
		p.f, p.m = "write", rwrite(k, v)
	default:
		p.f, p.m = "cas", rcas(k, s.rng.Int64N(v), v)
	}
	s.procs[i] = p
	s.b.invoke(s.ids[i], p.f, p.m)
}

// apply takes effect, unless the operation ends info and is dropped.
func (s *regSim) apply(p *regPending) {
	p.applied = true
	if s.rng.IntN(20) == 0 {
		p.out = Info
		if s.rng.IntN(2) == 0 {
			return
		}
	}
	st := s.vals[p.m.Key]
	switch p.f {
	case "read":
		p.m.Read = []int64{}
		if st.set {
			p.m.Read = []int64{st.value}
		}
	case "write":
		s.vals[p.m.Key] = regState{true, p.m.Arg}
	case "cas":
		if st == (regState{true, p.m.Expect}) {
			s.vals[p.m.Key] = regState{true, p.m.Arg}
		} else if p.out == OK {
			p.out = Fail
		}
	}
}

func (s *regSim) complete(i int, p *regPending) {
	s.b.complete(s.ids[i], p.out, p.f, p.m)
	if p.out == Info {
		s.ids[i] += len(s.procs)
	}
	s.procs[i] = nil
}

func anyPending[T any](ps []*T) bool {
	for _, p := range ps {
		if p != nil {
			return true
		}
	}
	return false
}
