package history

import (
	"fmt"
	"sort"
)

// CheckLock checks leased locks with fencing tokens: operations of one
// Hold micro-operation each (acquire the lock Key, act, release), whose
// Lease says what was held. Among the leases that were ever valid (learnt
// before their end), per lock:
//
//   - "duplicate-token": two grants carry one token (two holders could
//     act with it, and a fenced resource could not tell them apart);
//   - "overlap": one was learnt before another's end (two holders at
//     once: mutual exclusion broken);
//   - "token-order": in the order they were held, a token is not above
//     the one before (a fenced resource would refuse the later holder,
//     or accept a stale one).
//
// A lease whose grant came back after its deadline was never valid, and
// is checked for duplicate tokens only.
func CheckLock(h []Op) Result {
	pairs, bad := pairsOrReport("lock", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("lock", pairs)
	byLock := map[string][]heldLease{}
	for _, p := range pairs {
		if m, l, ok := leaseOf(p); ok {
			byLock[m.Key] = append(byLock[m.Key], heldLease{p.last(), *l})
		}
	}
	for _, k := range sortedKeys(byLock) {
		checkLeases(rep, k, byLock[k])
	}
	return rep.result()
}

// heldLease is a grant the history knows of, with its operation.
type heldLease struct {
	op Op
	l  Lease
}

// leaseOf is the lease a pair's completion carries, if any.
func leaseOf(p Pair) (Mop, *Lease, bool) {
	if p.Completion == nil || len(p.Completion.Value) != 1 {
		return Mop{}, nil, false
	}
	m := p.Completion.Value[0]
	return m, m.Lease, m.F == Hold && m.Lease != nil
}

func checkLeases(rep *report, key string, ls []heldLease) {
	tokens := map[uint64]heldLease{}
	for _, h := range ls {
		if o, dup := tokens[h.l.Token]; dup {
			rep.add(Anomaly{Kind: "duplicate-token", Forbidden: true, Ops: []Op{o.op, h.op},
				Explanation: fmt.Sprintf("%s and %s were both granted lock %s with token %d", name(o.op), name(h.op), key, h.l.Token)})
		}
		tokens[h.l.Token] = h
	}
	valid := heldInOrder(ls, func(h heldLease) Lease { return h.l })
	for i := 1; i < len(valid); i++ {
		a, b := valid[i-1], valid[i]
		if b.l.Granted < a.l.End() {
			rep.add(Anomaly{Kind: "overlap", Forbidden: true, Ops: []Op{a.op, b.op},
				Explanation: fmt.Sprintf("%s still held lock %s (token %d) %s after %s learnt of its own grant (token %d)", name(a.op), key, a.l.Token, fmtNanos(a.l.End()-b.l.Granted), name(b.op), b.l.Token)})
		}
		if b.l.Token <= a.l.Token {
			rep.add(Anomaly{Kind: "token-order", Forbidden: true, Ops: []Op{a.op, b.op},
				Explanation: fmt.Sprintf("%s held lock %s with token %d, and %s after it with token %d", name(a.op), key, a.l.Token, name(b.op), b.l.Token)})
		}
	}
}

// heldInOrder keeps the leases that were ever valid (learnt before their
// end: a grant that came back after its deadline never was), ordered by
// when they were learnt, the order they were held in if they never
// overlapped.
func heldInOrder[T any](xs []T, lease func(T) Lease) []T {
	var valid []T
	for _, x := range xs {
		if l := lease(x); l.Granted < l.End() {
			valid = append(valid, x)
		}
	}
	sort.Slice(valid, func(i, j int) bool { return lease(valid[i]).Granted < lease(valid[j]).Granted })
	return valid
}

func fmtNanos(ns int64) string { return fmt.Sprintf("%.3fms", float64(ns)/1e6) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
