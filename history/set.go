package history

import (
	"fmt"
	"sort"
)

// CheckSet checks a set history: operations F "add" ([add k v]) and F
// "read" ([r k [elements]]). Every element read was added by some add
// that did not fail ("unexpected" otherwise); every ok add is in every
// read invoked after it completed: a read without it is "stale" when a
// later read has it again, and it is "lost" when none does. Info adds may
// or may not appear.
func CheckSet(h []Op) Result {
	pairs, bad := pairsOrReport("set", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("set", pairs)
	s := newSetHistory(pairs)
	s.checkUnexpected(rep)
	s.checkMissing(rep)
	return rep.result()
}

// setRead is an ok read of a set.
type setRead struct {
	pair  Pair
	elems map[int64]bool
}

// setHistory is a set history indexed for checking.
type setHistory struct {
	adds  map[keyVal][]Pair    // every add invoked, by element
	okAdd []Pair               // the ok adds, in history order
	reads map[string][]setRead // ok reads by key, by invocation time
}

func newSetHistory(pairs []Pair) *setHistory {
	s := &setHistory{adds: map[keyVal][]Pair{}, reads: map[string][]setRead{}}
	for _, p := range pairs {
		ms := p.mops()
		if len(ms) != 1 {
			continue
		}
		switch m := ms[0]; {
		case p.Invoke.F == "add":
			s.adds[keyVal{m.Key, m.Arg}] = append(s.adds[keyVal{m.Key, m.Arg}], p)
			if p.Outcome() == OK {
				s.okAdd = append(s.okAdd, p)
			}
		case p.Invoke.F == "read" && p.Outcome() == OK && m.Read != nil:
			s.reads[m.Key] = append(s.reads[m.Key], setRead{p, elemSet(m.Read)})
		}
	}
	for _, rs := range s.reads {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].pair.invokeTime() < rs[j].pair.invokeTime() })
	}
	return s
}

func elemSet(vs []int64) map[int64]bool {
	s := make(map[int64]bool, len(vs))
	for _, v := range vs {
		s[v] = true
	}
	return s
}

// checkUnexpected finds elements read that no add that could have
// happened added.
func (s *setHistory) checkUnexpected(rep *report) {
	for k, rs := range s.reads {
		for _, r := range rs {
			for _, v := range r.pair.mops()[0].Read {
				s.checkAdded(rep, r.pair, k, v)
			}
		}
	}
}

func (s *setHistory) checkAdded(rep *report, r Pair, key string, v int64) {
	adds := s.adds[keyVal{key, v}]
	for _, a := range adds {
		if a.Outcome() != Fail {
			return
		}
	}
	if len(adds) == 0 {
		rep.add(Anomaly{Kind: "unexpected", Forbidden: true, Ops: []Op{r.last()},
			Explanation: fmt.Sprintf("%s read %d in %s, which no add added", name(r.last()), v, key)})
		return
	}
	rep.add(Anomaly{Kind: "unexpected", Forbidden: true, Ops: []Op{r.last(), adds[0].last()},
		Explanation: fmt.Sprintf("%s read %d in %s, whose add %s failed", name(r.last()), v, key, name(adds[0].last()))})
}

// checkMissing finds ok adds missing from reads invoked after they
// completed.
func (s *setHistory) checkMissing(rep *report) {
	for _, a := range s.okAdd {
		m := a.mops()[0]
		rs := s.reads[m.Key]
		c := a.completeTime()
		first := sort.Search(len(rs), func(i int) bool { return rs[i].pair.invokeTime() > c })
		s.checkAdd(rep, a, m, rs[first:])
	}
}

// checkAdd checks one ok add against the reads invoked after it
// completed.
func (s *setHistory) checkAdd(rep *report, a Pair, m Mop, after []setRead) {
	missing, seenAfter := -1, false // the last read without it; a read with it after that
	for i, r := range after {
		if !r.elems[m.Arg] {
			missing, seenAfter = i, false
		} else if missing >= 0 {
			seenAfter = true
		}
	}
	if missing < 0 {
		return
	}
	r := after[missing].pair.last()
	kind, why := "lost", "and no later read has it"
	if seenAfter {
		kind, why = "stale", "though a later read has it"
	}
	rep.add(Anomaly{Kind: kind, Forbidden: true, Ops: []Op{a.last(), r},
		Explanation: fmt.Sprintf("%s added %d to %s; %s, invoked after, read %s without it, %s", name(a.last()), m.Arg, m.Key, name(r), m.Key, why)})
}
