package history

import (
	"fmt"
	"sort"
	"strings"
)

// CheckLongFork checks Jepsen's long-fork workload: write transactions
// of one [w k 1] to a key never written before, read transactions of
// [r k [x]] or [r k []] over a group of keys. Two ok reads that saw
// incomparable sets of writes among the keys both read ("long-fork": each
// saw a write the other did not) contradict one order of commits, which
// snapshot isolation gives. A read of a failed write is G1a; of a key
// nobody wrote, "unexpected".
func CheckLongFork(h []Op) Result {
	pairs, bad := pairsOrReport("long-fork", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("long-fork", pairs)
	writes := map[string]Pair{}
	for _, p := range pairs {
		if ms := p.mops(); p.Invoke.F == "txn" && len(ms) == 1 && ms[0].F == Write {
			writes[ms[0].Key] = p
		}
	}
	reads := forkReads(rep, pairs, writes)
	checkForks(rep, reads)
	return rep.result()
}

// forkRead is an ok read transaction: which keys it read and which of
// them it saw written.
type forkRead struct {
	pair Pair
	seen map[string]bool // key -> saw the write
}

// forkReads collects the read transactions, one per distinct observation
// (the same keys, the same writes seen), reporting reads of writes that
// failed or never were.
func forkReads(rep *report, pairs []Pair, writes map[string]Pair) []forkRead {
	var out []forkRead
	distinct := map[string]bool{}
	for _, p := range pairs {
		r, ok := asForkRead(p)
		if !ok {
			continue
		}
		checkForkWrites(rep, r, writes)
		if sig := r.signature(); !distinct[sig] {
			distinct[sig] = true
			out = append(out, r)
		}
	}
	return out
}

func asForkRead(p Pair) (forkRead, bool) {
	ms := p.mops()
	if p.Invoke.F != "txn" || p.Outcome() != OK || len(ms) == 0 {
		return forkRead{}, false
	}
	r := forkRead{pair: p, seen: map[string]bool{}}
	for _, m := range ms {
		if m.F != Read || m.Read == nil {
			return forkRead{}, false
		}
		r.seen[m.Key] = len(m.Read) > 0
	}
	return r, true
}

func (r forkRead) signature() string {
	keys := make([]string, 0, len(r.seen))
	for k, s := range r.seen {
		keys = append(keys, fmt.Sprintf("%q=%v", k, s))
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func checkForkWrites(rep *report, r forkRead, writes map[string]Pair) {
	for k, seen := range r.seen {
		w, ok := writes[k]
		switch {
		case !seen:
		case !ok:
			rep.add(Anomaly{Kind: "unexpected", Forbidden: true, Ops: []Op{r.pair.last()},
				Explanation: fmt.Sprintf("%s saw %s written, which no transaction wrote", name(r.pair.last()), k)})
		case w.Outcome() == Fail:
			rep.add(Anomaly{Kind: "G1a", Forbidden: true, Ops: []Op{r.pair.last(), w.last()},
				Explanation: fmt.Sprintf("%s saw %s written by %s, which failed", name(r.pair.last()), k, name(w.last()))})
		}
	}
}

// checkForks compares every two distinct reads sharing a key.
func checkForks(rep *report, reads []forkRead) {
	byKey := map[string][]int{}
	for i, r := range reads {
		for k := range r.seen {
			byKey[k] = append(byKey[k], i)
		}
	}
	for i, r := range reads {
		compared := map[int]bool{}
		for k := range r.seen {
			for _, j := range byKey[k] {
				if j > i && !compared[j] {
					compared[j] = true
					checkFork(rep, r, reads[j])
				}
			}
		}
	}
}

// checkFork reports two reads that each saw a write the other did not,
// among the keys both read.
func checkFork(rep *report, a, b forkRead) {
	var onlyA, onlyB []string
	for k, sa := range a.seen {
		sb, both := b.seen[k]
		switch {
		case !both || sa == sb:
		case sa:
			onlyA = append(onlyA, k)
		default:
			onlyB = append(onlyB, k)
		}
	}
	if len(onlyA) == 0 || len(onlyB) == 0 {
		return
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	oa, ob := a.pair.last(), b.pair.last()
	rep.add(Anomaly{Kind: "long-fork", Forbidden: true, Ops: []Op{oa, ob},
		Explanation: fmt.Sprintf("%s saw writes of %v that %s did not, and %s saw writes of %v that %s did not", name(oa), onlyA, name(ob), name(ob), onlyB, name(oa))})
}
