package history

import (
	"fmt"
	"slices"
)

// ListAppendOptions configures CheckListAppend. The zero value checks
// snapshot isolation.
type ListAppendOptions struct {
	// RealTime adds real-time edges (T1 completed before T2 was invoked):
	// strong snapshot isolation, which a timestamp oracle gives.
	RealTime bool
}

// CheckListAppend checks a list-append history (operations F "txn" of
// append and r micro-operations) with Elle's method: it infers each key's
// version order from the reads, finds the anomalies visible in single
// reads, then builds the dependency graph and classifies a cycle of each
// strongly connected component.
func CheckListAppend(h []Op, o ListAppendOptions) Result {
	pairs, bad := pairsOrReport("list-append", h)
	if bad != nil {
		return bad.result()
	}
	la := newListAppend(pairs)
	rep := newReport("list-append", la.pairs)
	la.checkReads(rep)
	la.checkInternal(rep)
	la.checkLostUpdates(rep)
	g := la.graph(o.RealTime)
	findCycles(g, la, rep)
	return rep.result()
}

// write is where an appended value comes from.
type write struct {
	txn  int  // index in listAppend.pairs
	last bool // the last append of its transaction to its key
}

// keyVal names one appended value.
type keyVal struct {
	key string
	val int64
}

// listAppend is a list-append history indexed for checking.
type listAppend struct {
	pairs  []Pair             // the txn operations
	writes map[keyVal]write   // who appended each value (the first, if several did)
	order  map[string][]int64 // each key's inferred version order: its longest read
	pos    map[keyVal]int     // a value's index in its key's order
}

func newListAppend(all []Pair) *listAppend {
	la := &listAppend{writes: map[keyVal]write{}, order: map[string][]int64{}, pos: map[keyVal]int{}}
	for _, p := range all {
		if p.Invoke.F == "txn" {
			la.pairs = append(la.pairs, p)
		}
	}
	for i, p := range la.pairs {
		la.indexWrites(i, p.mops())
	}
	la.inferOrders()
	return la
}

func (la *listAppend) indexWrites(t int, ms []Mop) {
	for j, m := range ms {
		if m.F != Append {
			continue
		}
		kv := keyVal{m.Key, m.Arg}
		if _, dup := la.writes[kv]; dup {
			continue
		}
		la.writes[kv] = write{txn: t, last: !appendsLater(ms[j+1:], m.Key)}
	}
}

func appendsLater(ms []Mop, key string) bool {
	for _, m := range ms {
		if m.F == Append && m.Key == key {
			return true
		}
	}
	return false
}

// reads calls f for every read of an ok transaction.
func (la *listAppend) reads(f func(t int, m Mop)) {
	for i, p := range la.pairs {
		if p.Outcome() != OK {
			continue
		}
		for _, m := range p.mops() {
			if m.F == Read && m.Read != nil {
				f(i, m)
			}
		}
	}
}

// inferOrders takes each key's longest read as its version order.
func (la *listAppend) inferOrders() {
	la.reads(func(_ int, m Mop) {
		if len(m.Read) > len(la.order[m.Key]) {
			la.order[m.Key] = m.Read
		}
	})
	for k, vs := range la.order {
		for i, v := range vs {
			if _, seen := la.pos[keyVal{k, v}]; !seen {
				la.pos[keyVal{k, v}] = i
			}
		}
	}
}

// checkReads finds what single reads show: duplicates, orders that are
// not prefixes of each other, values nobody appended, aborted reads (G1a)
// and intermediate reads (G1b).
func (la *listAppend) checkReads(rep *report) {
	la.reads(func(t int, m Mop) {
		la.checkDuplicates(rep, t, m)
		la.checkPrefix(rep, t, m)
		for _, v := range m.Read {
			la.checkWriter(rep, t, m.Key, v)
		}
		la.checkIntermediate(rep, t, m)
	})
}

func (la *listAppend) checkDuplicates(rep *report, t int, m Mop) {
	seen := make(map[int64]bool, len(m.Read))
	for _, v := range m.Read {
		if seen[v] {
			rep.add(Anomaly{Kind: "duplicate-elements", Forbidden: true, Ops: []Op{la.op(t)},
				Explanation: fmt.Sprintf("%s read %d twice in %s = %v", la.name(t), v, m.Key, m.Read)})
			return
		}
		seen[v] = true
	}
}

func (la *listAppend) checkPrefix(rep *report, t int, m Mop) {
	longest := la.order[m.Key]
	if len(m.Read) <= len(longest) && slices.Equal(m.Read, longest[:len(m.Read)]) {
		return
	}
	rep.add(Anomaly{Kind: "incompatible-order", Forbidden: true, Ops: []Op{la.op(t)},
		Explanation: fmt.Sprintf("%s read %s = %v, not a prefix of the longest read %v", la.name(t), m.Key, m.Read, longest)})
}

func (la *listAppend) checkWriter(rep *report, t int, key string, v int64) {
	w, ok := la.writes[keyVal{key, v}]
	switch {
	case !ok:
		rep.add(Anomaly{Kind: "unexpected", Forbidden: true, Ops: []Op{la.op(t)},
			Explanation: fmt.Sprintf("%s read %d in %s, which no transaction appended", la.name(t), v, key)})
	case la.pairs[w.txn].Outcome() == Fail:
		rep.add(Anomaly{Kind: "G1a", Forbidden: true, Ops: []Op{la.op(t), la.op(w.txn)},
			Explanation: fmt.Sprintf("%s read %d in %s, appended by %s, which failed", la.name(t), v, key, la.name(w.txn))})
	}
}

// checkIntermediate: the version a read observes (its last element) must
// be its writer's last append to the key, unless the reader is the writer.
func (la *listAppend) checkIntermediate(rep *report, t int, m Mop) {
	if len(m.Read) == 0 {
		return
	}
	v := m.Read[len(m.Read)-1]
	w, ok := la.writes[keyVal{m.Key, v}]
	if !ok || w.last || w.txn == t {
		return
	}
	rep.add(Anomaly{Kind: "G1b", Forbidden: true, Ops: []Op{la.op(t), la.op(w.txn)},
		Explanation: fmt.Sprintf("%s read %s = %v, ending in %d, an intermediate append of %s", la.name(t), m.Key, m.Read, v, la.name(w.txn))})
}

func (la *listAppend) op(t int) Op       { return la.pairs[t].last() }
func (la *listAppend) name(t int) string { return name(la.op(t)) }
