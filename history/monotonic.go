package history

import (
	"fmt"
	"sort"
)

// CheckMonotonic checks counters: increment transactions read a key and
// write one more ([r k [x]] then [w k x+1], x = 0 when the key is
// absent), read-only transactions read several keys. Among ok
// transactions: two that wrote the same value to a key lost an update
// ("lost-update"); a process that reads a key below what it read or
// wrote before went back in time ("nonmonotonic"); a transaction invoked
// after another completed that reads a key below what the earlier read or
// wrote went back in real time ("nonmonotonic-realtime"), which strong
// snapshot isolation forbids.
func CheckMonotonic(h []Op) Result {
	pairs, bad := pairsOrReport("monotonic", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("monotonic", pairs)
	var txns []counterTxn
	for _, p := range pairs {
		if p.Invoke.F == "txn" && p.Outcome() == OK {
			txns = append(txns, newCounterTxn(p))
		}
	}
	checkCounterWrites(rep, txns)
	checkProcessOrder(rep, txns)
	checkRealTimeOrder(rep, txns)
	return rep.result()
}

// counterTxn is what an ok transaction saw of each key.
type counterTxn struct {
	pair     Pair
	read     map[string]int64 // the value read, 0 when absent
	observed map[string]int64 // the value read or written, the greater
}

func newCounterTxn(p Pair) counterTxn {
	t := counterTxn{pair: p, read: map[string]int64{}, observed: map[string]int64{}}
	for _, m := range p.mops() {
		switch {
		case m.F == Read && m.Read != nil:
			var v int64
			if len(m.Read) > 0 {
				v = m.Read[0]
			}
			t.read[m.Key] = v
			t.observed[m.Key] = max(t.observed[m.Key], v)
		case m.F == Write:
			t.observed[m.Key] = max(t.observed[m.Key], m.Arg)
		}
	}
	return t
}

func (t counterTxn) op() Op { return t.pair.last() }

// checkCounterWrites finds two transactions that wrote the same value.
func checkCounterWrites(rep *report, txns []counterTxn) {
	writer := map[keyVal]counterTxn{}
	for _, t := range txns {
		for _, m := range t.pair.mops() {
			if m.F != Write {
				continue
			}
			kv := keyVal{m.Key, m.Arg}
			if w, dup := writer[kv]; dup {
				rep.add(Anomaly{Kind: "lost-update", Forbidden: true, Ops: []Op{w.op(), t.op()},
					Explanation: fmt.Sprintf("%s and %s both wrote %d to %s", name(w.op()), name(t.op()), m.Arg, m.Key)})
				continue
			}
			writer[kv] = t
		}
	}
}

// high is the highest value seen of a key so far, and by whom.
type high struct {
	value int64
	by    counterTxn
}

// checkProcessOrder: each process's transactions, in order, never read a
// key below what the process saw of it before.
func checkProcessOrder(rep *report, txns []counterTxn) {
	seen := map[int]map[string]high{} // process -> key -> highest
	for _, t := range txns {
		p := t.pair.Invoke.Process
		if seen[p] == nil {
			seen[p] = map[string]high{}
		}
		for k, v := range t.read {
			if hi, ok := seen[p][k]; ok && v < hi.value {
				rep.add(nonmonotonic("nonmonotonic", k, v, hi, t))
			}
		}
		for k, v := range t.observed {
			if hi, ok := seen[p][k]; !ok || v > hi.value {
				seen[p][k] = high{v, t}
			}
		}
	}
}

func nonmonotonic(kind, key string, v int64, hi high, t counterTxn) Anomaly {
	return Anomaly{Kind: kind, Forbidden: true, Ops: []Op{hi.by.op(), t.op()},
		Explanation: fmt.Sprintf("%s saw %s = %d, then %s read %s = %d", name(hi.by.op()), key, hi.value, name(t.op()), key, v)}
}

// checkRealTimeOrder: a transaction never reads a key below what a
// transaction completed before its invocation saw of it (other processes'
// transactions; checkProcessOrder covers the process's own).
func checkRealTimeOrder(rep *report, txns []counterTxn) {
	byInvoke := sortedTxns(txns, Pair.invokeTime)
	byComplete := sortedTxns(txns, Pair.completeTime)
	highest := map[string]high{}
	done := 0
	for _, t := range byInvoke {
		for ; done < len(byComplete) && byComplete[done].pair.completeTime() < t.pair.invokeTime(); done++ {
			for k, v := range byComplete[done].observed {
				if hi, ok := highest[k]; !ok || v > hi.value {
					highest[k] = high{v, byComplete[done]}
				}
			}
		}
		for k, v := range t.read {
			hi, ok := highest[k]
			if ok && v < hi.value && hi.by.pair.Invoke.Process != t.pair.Invoke.Process {
				rep.add(nonmonotonic("nonmonotonic-realtime", k, v, hi, t))
			}
		}
	}
}

func sortedTxns(txns []counterTxn, at func(Pair) int64) []counterTxn {
	out := append([]counterTxn(nil), txns...)
	sort.SliceStable(out, func(i, j int) bool { return at(out[i].pair) < at(out[j].pair) })
	return out
}
