package history

import (
	"fmt"
	"sort"
)

// CheckGraph checks an edge store whose mutations carry versions (later
// wins): Insert and Remove operations on edges (Key "src>tgt", version
// Arg, the inserted property v = Arg), then a final read of every edge
// (EdgeRead: [] absent, [version, v] present) and of the store's own
// check (Checked: Read[0] mismatches between its indices, degrees and
// snapshots). Forbidden:
//
//   - "check-mismatch": the store's check found mismatches;
//   - "torn": an edge's property is not its version's;
//   - "phantom": an edge holds a version no insert that could have
//     happened wrote;
//   - "lost": an acknowledged mutation newer than what the edge holds (a
//     present edge older than an acknowledged insert or delete, or an
//     absent edge whose newest acknowledged insert no delete outdates).
func CheckGraph(h []Op) Result {
	pairs, bad := pairsOrReport("graph", h)
	if bad != nil {
		return bad.result()
	}
	rep := newReport("graph", pairs)
	muts := map[string][]edgeMut{}
	finals := map[string]Pair{}
	for _, p := range pairs {
		for _, m := range p.last().Value {
			switch {
			case (m.F == Insert || m.F == Remove) && p.Outcome() != Fail:
				muts[m.Key] = append(muts[m.Key], edgeMut{p: p, m: m})
			case m.F == EdgeRead && p.Outcome() == OK:
				finals[m.Key] = p
			case m.F == Checked && p.Outcome() == OK && len(m.Read) == 1 && m.Read[0] > 0:
				rep.add(Anomaly{Kind: "check-mismatch", Forbidden: true, Ops: []Op{p.last()},
					Explanation: fmt.Sprintf("the graph's check found %d mismatches between indices, degrees and snapshots", m.Read[0])})
			}
		}
	}
	if len(finals) == 0 {
		rep.note("unchecked-no-final-read")
	}
	for _, k := range sortedKeys(finals) {
		checkEdge(rep, k, finals[k], muts[k])
	}
	return rep.result()
}

// edgeMut is a mutation that may have happened (ok or unknown).
type edgeMut struct {
	p Pair
	m Mop
}

func (e edgeMut) ok() bool { return e.p.Outcome() == OK }

func checkEdge(rep *report, key string, final Pair, ms []edgeMut) {
	var read []int64
	for _, m := range final.last().Value {
		if m.F == EdgeRead && m.Key == key {
			read = m.Read
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].m.Arg < ms[j].m.Arg })
	fo := final.last()
	if len(read) == 2 {
		checkPresent(rep, key, fo, read, ms)
		return
	}
	// Absent: the newest acknowledged insert must be outdated by a delete.
	for i := len(ms) - 1; i >= 0; i-- {
		switch {
		case ms[i].m.F == Remove:
			return
		case ms[i].ok():
			rep.add(Anomaly{Kind: "lost", Forbidden: true, Ops: []Op{ms[i].p.last(), fo},
				Explanation: fmt.Sprintf("%s inserted edge %s at version %d, acknowledged and newer than every delete, and %s found it absent", name(ms[i].p.last()), key, ms[i].m.Arg, name(fo))})
			return
		}
	}
}

func checkPresent(rep *report, key string, fo Op, read []int64, ms []edgeMut) {
	ver, v := read[0], read[1]
	if v != ver {
		rep.add(Anomaly{Kind: "torn", Forbidden: true, Ops: []Op{fo},
			Explanation: fmt.Sprintf("%s found edge %s at version %d with property v = %d, another version's", name(fo), key, ver, v)})
	}
	wrote := false
	for _, e := range ms {
		if e.m.F == Insert && e.m.Arg == ver {
			wrote = true
		}
		if e.ok() && e.m.Arg > ver {
			rep.add(Anomaly{Kind: "lost", Forbidden: true, Ops: []Op{e.p.last(), fo},
				Explanation: fmt.Sprintf("%s's %s of edge %s at version %d was acknowledged, and %s found the edge at the older version %d", name(e.p.last()), e.m.F, key, e.m.Arg, name(fo), ver)})
			break
		}
	}
	if !wrote {
		rep.add(Anomaly{Kind: "phantom", Forbidden: true, Ops: []Op{fo},
			Explanation: fmt.Sprintf("%s found edge %s at version %d, which no insert that could have happened wrote", name(fo), key, ver)})
	}
}
