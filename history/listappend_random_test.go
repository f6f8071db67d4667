package history

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("history.seed", 0, "seed of the randomized history tests (0: from the clock)")

// seed returns the seed to use and logs it for replay.
func seed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -history.seed=%d)", s, s)
	return s
}

// sim generates a list-append history from one store. A transaction
// reads a snapshot taken at a moment after its invocation and appends at
// a later moment before its completion: with si, those are two steps and
// a transaction whose appended key changed in between fails (first
// committer wins), which is strong snapshot isolation; without, one step,
// which is strict serializability.
type sim struct {
	rng    *rand.Rand
	b      builder
	lists  map[string][]int64
	next   map[string]int64
	procs  []simProc
	keys   int
	faults bool
	si     bool
}

type simProc struct {
	id      int
	ms      []Mop // the pending transaction, nil when idle
	phase   int   // invoked, snapshot taken, committed
	snap    map[string]int
	outcome Type
}

func newSim(seed uint64, procs, keys int, faults bool) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed)), lists: map[string][]int64{}, next: map[string]int64{}, keys: keys, faults: faults}
	for i := range procs {
		s.procs = append(s.procs, simProc{id: i})
	}
	return s
}

// run generates n transactions, then completes the outstanding ones.
func (s *sim) run(n int) []Op {
	for started := 0; started < n; {
		p := &s.procs[s.rng.IntN(len(s.procs))]
		if p.ms == nil {
			started++
		}
		s.step(p)
	}
	for i := range s.procs {
		for s.procs[i].ms != nil {
			s.step(&s.procs[i])
		}
	}
	return s.b.h
}

// step advances a process: invoke, snapshot, commit, complete.
func (s *sim) step(p *simProc) {
	switch p.phase {
	case 0:
		p.ms = s.txn()
		s.b.invoke(p.id, "txn", p.ms...)
		p.phase = 1
	case 1:
		p.snap = map[string]int{}
		for _, m := range p.ms {
			p.snap[m.Key] = len(s.lists[m.Key])
		}
		p.phase = 2
		if !s.si {
			s.step(p)
		}
	case 2:
		s.commit(p)
		p.phase = 3
	default:
		s.b.complete(p.id, p.outcome, "txn", p.ms...)
		if p.outcome == Info {
			p.id += len(s.procs) // a process that ended info performs no other
		}
		p.ms, p.phase = nil, 0
	}
}

func (s *sim) commit(p *simProc) {
	p.outcome = OK
	if s.faults {
		switch s.rng.IntN(20) {
		case 0:
			p.outcome = Fail
			return
		case 1:
			p.outcome = Info
			if s.rng.IntN(2) == 0 {
				return
			}
		}
	}
	for _, m := range p.ms {
		if m.F == Append && len(s.lists[m.Key]) != p.snap[m.Key] {
			if p.outcome == OK {
				p.outcome = Fail
			}
			return
		}
	}
	own := map[string][]int64{}
	for i, m := range p.ms {
		if m.F == Append {
			own[m.Key] = append(own[m.Key], m.Arg)
		} else {
			p.ms[i].Read = append(slices.Clone(s.lists[m.Key][:p.snap[m.Key]]), own[m.Key]...)
		}
	}
	for k, vs := range own {
		s.lists[k] = append(s.lists[k], vs...)
	}
}

func (s *sim) txn() []Mop {
	ms := make([]Mop, 1+s.rng.IntN(4))
	for i := range ms {
		k := fmt.Sprintf("k%d", s.rng.IntN(s.keys))
		if s.rng.IntN(2) == 0 {
			s.next[k]++
			ms[i] = ap(k, s.next[k])
		} else {
			ms[i] = Mop{F: Read, Key: k}
		}
	}
	return ms
}

// TestListAppendRandomSI checks snapshot-isolated histories pass under
// strong snapshot isolation, their write skew counted as G2.
func TestListAppendRandomSI(t *testing.T) {
	base := seed(t)
	g2 := 0
	for i := range uint64(20) {
		s := newSim(base+i, 2+int(i%8), 2+int(i%4), true)
		s.si = true
		r := CheckListAppend(s.run(300), ListAppendOptions{RealTime: true})
		g2 += r.Counts["G2"]
		if delete(r.Counts, "G2"); !r.Valid || len(r.Counts) > 0 {
			t.Fatalf("seed %d: %s\n%+v", base+i, r.Summary(), r.Anomalies)
		}
	}
	t.Logf("%d G2 cycles", g2)
}

func TestListAppendRandomValid(t *testing.T) {
	base := seed(t)
	for i := range uint64(20) {
		h := newSim(base+i, 1+int(i%8), 3+int(i%5), true).run(300)
		r := CheckListAppend(h, ListAppendOptions{RealTime: true})
		if !r.Valid || len(r.Counts) > 0 {
			t.Fatalf("seed %d: %s\n%+v", base+i, r.Summary(), r.Anomalies)
		}
	}
}

// mutations corrupt one read of a valid history; the checker must find
// the kind given.
var mutations = []struct {
	kind   string
	mutate func(read []int64) []int64
}{
	{"incompatible-order", func(r []int64) []int64 { // reorder
		r = slices.Clone(r)
		r[0], r[1] = r[1], r[0]
		return r
	}},
	{"incompatible-order", func(r []int64) []int64 { return slices.Delete(slices.Clone(r), 0, 1) }}, // drop
	{"duplicate-elements", func(r []int64) []int64 { return append(slices.Clone(r), r[0]) }},        // duplicate
}

func TestListAppendRandomMutated(t *testing.T) {
	base := seed(t)
	mutated := 0
	for i := range uint64(20) {
		h := newSim(base+i, 4, 3, true).run(200)
		for _, m := range mutations {
			mh := slices.Clone(h)
			if !mutateRead(mh, m.mutate) {
				continue
			}
			mutated++
			r := CheckListAppend(mh, ListAppendOptions{RealTime: true})
			if r.Valid || r.Counts[m.kind] == 0 {
				t.Errorf("seed %d: %s not found: %s", base+i, m.kind, r.Summary())
			}
		}
	}
	if mutated < 20 {
		t.Errorf("only %d histories mutated", mutated)
	}
}

// mutateRead replaces one ok read of two or more elements whose key has
// another read at least as long (so the longest read stays intact).
func mutateRead(h []Op, f func([]int64) []int64) bool {
	longest := map[string]int{} // key -> count of reads of the longest length
	size := map[string]int{}
	for _, o := range h {
		for _, m := range o.Value {
			if o.Type == OK && m.F == Read {
				switch {
				case len(m.Read) > size[m.Key]:
					size[m.Key], longest[m.Key] = len(m.Read), 1
				case len(m.Read) == size[m.Key]:
					longest[m.Key]++
				}
			}
		}
	}
	for i, o := range h {
		for j, m := range o.Value {
			if o.Type == OK && m.F == Read && len(m.Read) >= 2 && (len(m.Read) < size[m.Key] || longest[m.Key] > 1) {
				v := slices.Clone(o.Value)
				v[j].Read = f(m.Read)
				h[i].Value = v
				return true
			}
		}
	}
	return false
}

// BenchmarkCheckListAppendSI checks 10,000 snapshot-isolated
// transactions over 100 keys from 10 concurrent processes, with real-time
// edges: write skew makes strongly connected components to classify.
func BenchmarkCheckListAppendSI(b *testing.B) {
	s := newSim(1, 10, 100, true)
	s.si = true
	h := s.run(10_000)
	b.ResetTimer()
	for range b.N {
		if r := CheckListAppend(h, ListAppendOptions{RealTime: true}); !r.Valid {
			b.Fatal(r.Summary())
		}
	}
}

// BenchmarkCheckListAppend checks 10,000 transactions over 100 keys from
// 10 concurrent processes, with real-time edges.
func BenchmarkCheckListAppend(b *testing.B) {
	h := newSim(1, 10, 100, true).run(10_000)
	b.ResetTimer()
	for range b.N {
		if r := CheckListAppend(h, ListAppendOptions{RealTime: true}); !r.Valid {
			b.Fatal(r.Summary())
		}
	}
}
