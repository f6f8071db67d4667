package history

import (
	"fmt"
	"sort"
)

// Dependency edge types, a bit each: an edge between two transactions may
// have several.
const (
	ww uint8 = 1 << iota // write-write: T2 appended the version after T1's
	wr                   // write-read: T2 read the version T1 appended
	rw                   // read-write (anti-dependency): T2 appended the version after the one T1 read
	rt                   // real time: T1 completed before T2 was invoked
)

// edge is a dependency from its graph node to node to. key names, per
// type (ww, wr, rw), a key that justifies it.
type edge struct {
	to   int32
	mask uint8
	key  [3]string
}

// depGraph is the dependency graph of the committed transactions.
type depGraph struct {
	txns  []int       // node -> transaction (index in listAppend.pairs)
	node  map[int]int // transaction -> node
	adj   [][]edge
	index map[uint64]int // from<<32|to -> position in adj[from]
}

func (g *depGraph) add(from, to int, kind uint8, key string) {
	id := uint64(from)<<32 | uint64(to)
	i, ok := g.index[id]
	if !ok {
		i = len(g.adj[from])
		g.index[id] = i
		g.adj[from] = append(g.adj[from], edge{to: int32(to)})
	}
	e := &g.adj[from][i]
	e.mask |= kind
	if t := typeIndex(kind); t < len(e.key) && e.key[t] == "" {
		e.key[t] = key
	}
}

func typeIndex(kind uint8) int {
	switch kind {
	case ww:
		return 0
	case wr:
		return 1
	case rw:
		return 2
	}
	return 3
}

// extRead is a transaction's external read of a key: its first read of
// it, before it appended to it, which shows the snapshot it read.
type extRead struct {
	txn  int
	key  string
	list []int64
}

// extReads lists the external reads of ok transactions.
func (la *listAppend) extReads() []extRead {
	var out []extRead
	for t, p := range la.pairs {
		if p.Outcome() != OK {
			continue
		}
		touched := map[string]bool{}
		for _, m := range p.mops() {
			if m.F == Read && m.Read != nil && !touched[m.Key] {
				out = append(out, extRead{t, m.Key, m.Read})
			}
			touched[m.Key] = true
		}
	}
	return out
}

// committed is whether a transaction belongs in the graph: it is ok, or
// info and some read saw one of its appends.
func (la *listAppend) committed(t int) bool {
	p := la.pairs[t]
	switch p.Outcome() {
	case OK:
		return true
	case Fail:
		return false
	}
	for _, m := range p.mops() {
		if _, seen := la.pos[keyVal{m.Key, m.Arg}]; m.F == Append && seen {
			return true
		}
	}
	return false
}

// graph builds the dependency graph, with real-time edges if asked.
func (la *listAppend) graph(realTime bool) *depGraph {
	g := &depGraph{node: map[int]int{}, index: map[uint64]int{}}
	for t := range la.pairs {
		if la.committed(t) {
			g.node[t] = len(g.txns)
			g.txns = append(g.txns, t)
		}
	}
	g.adj = make([][]edge, len(g.txns))
	la.addWW(g)
	for _, r := range la.extReads() {
		la.addReadEdges(g, r)
	}
	if realTime {
		la.addRealTime(g)
	}
	return g
}

// addWW links the writers of successive versions of each key.
func (la *listAppend) addWW(g *depGraph) {
	for k, vs := range la.order {
		for i := 1; i < len(vs); i++ {
			a, aok := la.writerNode(g, k, vs[i-1])
			b, bok := la.writerNode(g, k, vs[i])
			if aok && bok && a != b {
				g.add(a, b, ww, k)
			}
		}
	}
}

func (la *listAppend) writerNode(g *depGraph, key string, v int64) (int, bool) {
	w, ok := la.writes[keyVal{key, v}]
	if !ok {
		return 0, false
	}
	n, ok := g.node[w.txn]
	return n, ok
}

// addReadEdges adds wr from the writer of the version read and rw to the
// writer of the next version.
func (la *listAppend) addReadEdges(g *depGraph, r extRead) {
	n := g.node[r.txn]
	next := 0
	if len(r.list) > 0 {
		v := r.list[len(r.list)-1]
		if w, ok := la.writerNode(g, r.key, v); ok && w != n {
			g.add(w, n, wr, r.key)
		}
		i, ok := la.pos[keyVal{r.key, v}]
		if !ok {
			return
		}
		next = i + 1
	}
	if vs := la.order[r.key]; next < len(vs) {
		if w, ok := la.writerNode(g, r.key, vs[next]); ok && w != n {
			g.add(n, w, rw, r.key)
		}
	}
}

// addRealTime adds, from each transaction, real-time edges to its
// frontier only: the transactions invoked after it completed with none
// wholly in between. Every other real-time order follows by transitivity,
// so the O(n²) edges are not needed.
func (la *listAppend) addRealTime(g *depGraph) {
	n := len(g.txns)
	byInvoke := make([]int, n)
	for i := range byInvoke {
		byInvoke[i] = i
	}
	inv := func(i int) int64 { return la.pairs[g.txns[i]].invokeTime() }
	cpl := func(i int) int64 { return la.pairs[g.txns[i]].completeTime() }
	sort.SliceStable(byInvoke, func(a, b int) bool { return inv(byInvoke[a]) < inv(byInvoke[b]) })
	sufMin := make([]int64, n+1) // least completion among byInvoke[i:]
	sufMin[n] = infinity
	for i := n - 1; i >= 0; i-- {
		sufMin[i] = min(sufMin[i+1], cpl(byInvoke[i]))
	}
	for a := 0; a < n; a++ {
		c := cpl(a)
		if c == infinity {
			continue
		}
		j := sort.Search(n, func(i int) bool { return inv(byInvoke[i]) > c })
		for k := j; k < n && inv(byInvoke[k]) <= sufMin[j]; k++ {
			g.add(a, byInvoke[k], rt, "")
		}
	}
}

// checkLostUpdates finds ok transactions that read the same version of a
// key and both appended to it: one of the appends overwrote a state the
// other never saw.
func (la *listAppend) checkLostUpdates(rep *report) {
	type version struct {
		key  string
		last int64
		n    int
	}
	groups := map[version][]int{}
	var order []version
	for _, r := range la.extReads() {
		if !appendsLater(la.pairs[r.txn].mops(), r.key) {
			continue
		}
		v := version{key: r.key, n: len(r.list)}
		if len(r.list) > 0 {
			v.last = r.list[len(r.list)-1]
		}
		if groups[v] == nil {
			order = append(order, v)
		}
		groups[v] = append(groups[v], r.txn)
	}
	for _, v := range order {
		if ts := groups[v]; len(ts) > 1 {
			la.lostUpdate(rep, v.key, ts)
		}
	}
}

func (la *listAppend) lostUpdate(rep *report, key string, ts []int) {
	ops := make([]Op, len(ts))
	for i, t := range ts {
		ops[i] = la.op(t)
	}
	rep.add(Anomaly{Kind: "lost-update", Forbidden: true, Ops: ops,
		Explanation: fmt.Sprintf("%s read the same version of %s and all appended to it", names(ops...), key)})
}
