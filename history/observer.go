package history

import (
	"fmt"
	"slices"
)

// CheckObserver checks an observer history: operations F "append"
// ([append k v]: a transaction appends the unique value v to the list in
// the observed column of key k) and one final read F "final", made once
// the observers had time to catch up: for every key [r k list], the
// observed column's list, and [processed k list], what the observer
// appended, one value per committed run: the last element of the list
// its run read.
//
// An observer run commits at most once per change, sees a snapshot that
// holds every change an earlier committed run saw, and some run follows
// the last change. So of each key:
//
//   - the list holds every ok append, no failed one, no value twice
//     ("lost", "unexpected", "duplicate-elements");
//   - every processed value is an element of the list ("unexpected-run":
//     a run saw a change that was never committed);
//   - the processed values follow the list's order, each at a later
//     position than the one before ("duplicate-run": two runs committed
//     for one change; "out-of-order-run": a run saw an older list than a
//     run that committed before it);
//   - the last processed value is the list's last ("unprocessed": a
//     committed change no run followed, its notification lost).
//
// Counted, not anomalies: "changes" (elements of the lists) and "runs"
// (processed values): fewer runs than changes is notifications
// collapsing.
func CheckObserver(h []Op) Result {
	pairs, bad := pairsOrReport("observer", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("observer", pairs)
	appends := map[keyVal][]Pair{}
	var final *Pair
	for _, p := range pairs {
		switch {
		case p.Invoke.F == "append":
			for _, m := range p.mops() {
				appends[keyVal{m.Key, m.Arg}] = append(appends[keyVal{m.Key, m.Arg}], p)
			}
		case p.Invoke.F == "final" && p.Outcome() == OK:
			final = &p
		}
	}
	if final == nil {
		rep.note("no-final-read")
		return rep.result()
	}
	lists, runs := map[string][]int64{}, map[string][]int64{}
	var keys []string
	for _, m := range final.mops() {
		switch m.F {
		case Read:
			lists[m.Key] = m.Read
			keys = append(keys, m.Key)
		case Processed:
			runs[m.Key] = m.Read
		}
	}
	o := &observerCheck{rep: rep, final: final.last(), appends: appends}
	for _, k := range keys {
		rep.r.Counts["changes"] += len(lists[k])
		rep.r.Counts["runs"] += len(runs[k])
		o.checkList(k, lists[k])
		o.checkRuns(k, lists[k], runs[k])
	}
	o.checkLost(lists)
	return rep.result()
}

// observerCheck is the state of CheckObserver.
type observerCheck struct {
	rep     *report
	final   Op
	appends map[keyVal][]Pair
}

// checkList checks a key's list against the appends.
func (o *observerCheck) checkList(k string, list []int64) {
	seen := map[int64]bool{}
	for _, v := range list {
		if seen[v] {
			o.rep.add(Anomaly{Kind: "duplicate-elements", Forbidden: true, Ops: []Op{o.final},
				Explanation: fmt.Sprintf("%s read %d twice in %s's list %v", name(o.final), v, k, list)})
		}
		seen[v] = true
		as := o.appends[keyVal{k, v}]
		if slices.ContainsFunc(as, func(p Pair) bool { return p.Outcome() != Fail }) {
			continue
		}
		ops, why := []Op{o.final}, "which no append appended"
		if len(as) > 0 {
			ops, why = append(ops, as[0].last()), fmt.Sprintf("whose append %s failed", name(as[0].last()))
		}
		o.rep.add(Anomaly{Kind: "unexpected", Forbidden: true, Ops: ops,
			Explanation: fmt.Sprintf("%s read %d in %s's list, %s", name(o.final), v, k, why)})
	}
}

// checkLost finds ok appends missing from the final lists.
func (o *observerCheck) checkLost(lists map[string][]int64) {
	for kv, as := range o.appends {
		for _, a := range as {
			if a.Outcome() == OK && !slices.Contains(lists[kv.key], kv.val) {
				o.rep.add(Anomaly{Kind: "lost", Forbidden: true, Ops: []Op{a.last(), o.final},
					Explanation: fmt.Sprintf("%s appended %d to %s, and the final read %s has no such element", name(a.last()), kv.val, kv.key, name(o.final))})
			}
		}
	}
}

// checkRuns checks a key's processed values against its list.
func (o *observerCheck) checkRuns(k string, list, runs []int64) {
	pos := make(map[int64]int, len(list))
	for i, v := range list {
		pos[v] = i
	}
	last := -1
	for _, v := range runs {
		i, ok := pos[v]
		switch {
		case !ok:
			o.rep.add(Anomaly{Kind: "unexpected-run", Forbidden: true, Ops: []Op{o.final},
				Explanation: fmt.Sprintf("an observer run of %s saw %d last, which is not in the list %s read: a change never committed", k, v, name(o.final))})
			continue
		case i == last:
			o.rep.add(Anomaly{Kind: "duplicate-run", Forbidden: true, Ops: []Op{o.final},
				Explanation: fmt.Sprintf("two observer runs of %s committed for one change (%d): the processed values %s read are %v", k, v, name(o.final), runs)})
		case i < last:
			o.rep.add(Anomaly{Kind: "out-of-order-run", Forbidden: true, Ops: []Op{o.final},
				Explanation: fmt.Sprintf("an observer run of %s saw %d last, older than what a run committed before it saw: the processed values %s read are %v, the list %v", k, v, name(o.final), runs, list)})
		}
		last = max(last, i)
	}
	if len(list) > 0 && (len(runs) == 0 || runs[len(runs)-1] != list[len(list)-1]) {
		o.rep.add(Anomaly{Kind: "unprocessed", Forbidden: true, Ops: []Op{o.final},
			Explanation: fmt.Sprintf("no observer run of %s followed its last change (%d): the processed values %s read are %v, the list %v", k, list[len(list)-1], name(o.final), runs, list)})
	}
}
