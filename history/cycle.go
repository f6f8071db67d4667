package history

import (
	"fmt"
	"strings"
)

// singleBudget bounds the edges the G-single search of one component
// visits (a breadth-first search per anti-dependency edge). Past it, the
// search gives up and the later searches classify what they find, so a
// G-single cycle may be reported from the G-nonadjacent or G2 search with
// its right kind, or missed in favour of another cycle of the component.
const singleBudget = 4_000_000

// cycle is a cycle of the dependency graph: nodes[i] -labels[i]-> nodes[i+1],
// the last back to the first. A label is one edge type.
type cycle struct {
	nodes  []int
	labels []uint8
}

// findCycles reports one cycle of each strongly connected component of
// the dependency graph: the most severe it finds.
func findCycles(g *depGraph, la *listAppend, rep *report) {
	all := make([][]int32, len(g.adj))
	for v, es := range g.adj {
		for _, e := range es {
			all[v] = append(all[v], e.to)
		}
	}
	for _, comp := range tarjan(all) {
		if c := newComponent(g, comp).find(); c != nil {
			rep.add(la.cycleAnomaly(g, c))
		}
	}
}

// component searches one strongly connected component for cycles.
type component struct {
	g     *depGraph
	nodes []int       // local -> graph node
	local map[int]int // graph node -> local
}

func newComponent(g *depGraph, nodes []int) *component {
	c := &component{g: g, nodes: nodes, local: make(map[int]int, len(nodes))}
	for i, n := range nodes {
		c.local[n] = i
	}
	return c
}

// find tries the searches from the most severe class down: cycles of ww
// edges (G0), of ww and wr (G1c), with one rw (G-single), with rw edges
// never adjacent (G-nonadjacent); then the same with real-time edges;
// then any cycle (G2, or whatever the classification says).
func (c *component) find() *cycle {
	for _, rtBit := range []uint8{0, rt} {
		if cy := c.restricted(ww | rtBit); cy != nil {
			return cy
		}
		if cy := c.restricted(ww | wr | rtBit); cy != nil {
			return cy
		}
		if cy := c.single(ww | wr | rtBit); cy != nil {
			return cy
		}
		if cy := c.nonadjacent(ww | wr | rtBit); cy != nil {
			return cy
		}
	}
	return c.restricted(ww | wr | rw | rt)
}

// each calls f for each edge inside the component, in local numbers.
func (c *component) each(f func(u, v int, mask uint8)) {
	for u, n := range c.nodes {
		for _, e := range c.g.adj[n] {
			if v, ok := c.local[int(e.to)]; ok {
				f(u, v, e.mask)
			}
		}
	}
}

// adjacency is the component's edges with a type in allow.
func (c *component) adjacency(allow uint8) [][]int32 {
	adj := make([][]int32, len(c.nodes))
	c.each(func(u, v int, mask uint8) {
		if mask&allow != 0 {
			adj[u] = append(adj[u], int32(v))
		}
	})
	return adj
}

// restricted finds a cycle of edges with a type in allow.
func (c *component) restricted(allow uint8) *cycle {
	adj := c.adjacency(allow)
	comps := tarjan(adj)
	if len(comps) == 0 {
		return nil
	}
	s := comps[0][0]
	budget := -1
	path := bfsPath(adj, s, s, &budget)
	return c.labelled(path, func(int, int) uint8 { return allow })
}

// single finds a cycle of one rw edge closed by edges with a type in
// nonRW.
func (c *component) single(nonRW uint8) *cycle {
	adj := c.adjacency(nonRW)
	budget := singleBudget
	var found *cycle
	c.each(func(u, v int, mask uint8) {
		if found != nil || mask&rw == 0 || budget <= 0 {
			return
		}
		if path := bfsPath(adj, v, u, &budget); path != nil {
			path = append([]int{u}, path...)
			found = c.labelled(path, func(i, _ int) uint8 {
				if i == 0 {
					return rw
				}
				return nonRW
			})
		}
	})
	return found
}

// nonadjacent finds a cycle whose rw edges are never adjacent (nor the
// last and the first), searching the graph of states (node, whether the
// edge entering it was rw) in which an rw edge may only leave a state
// entered by another edge. A cycle there is a closed walk of the
// dependency graph.
func (c *component) nonadjacent(nonRW uint8) *cycle {
	adj := make([][]int32, 2*len(c.nodes))
	c.each(func(u, v int, mask uint8) {
		if mask&nonRW != 0 {
			adj[2*u] = append(adj[2*u], int32(2*v))
			adj[2*u+1] = append(adj[2*u+1], int32(2*v))
		}
		if mask&rw != 0 {
			adj[2*u] = append(adj[2*u], int32(2*v+1))
		}
	})
	comps := tarjan(adj)
	if len(comps) == 0 {
		return nil
	}
	s := comps[0][0]
	budget := -1
	states := bfsPath(adj, s, s, &budget)
	path := make([]int, len(states))
	for i, st := range states {
		path[i] = st / 2
	}
	return c.labelled(path, func(_, next int) uint8 {
		if states[next]%2 == 1 {
			return rw
		}
		return nonRW
	})
}

// labelled turns a closed path of local nodes (first = last) into a
// cycle, labelling edge i with the most benign of its types that
// allowed(i, i+1) permits.
func (c *component) labelled(path []int, allowed func(i, next int) uint8) *cycle {
	cy := &cycle{}
	for i := 0; i+1 < len(path); i++ {
		from, to := c.nodes[path[i]], c.nodes[path[i+1]]
		e := c.g.adj[from][c.g.index[uint64(from)<<32|uint64(to)]]
		cy.nodes = append(cy.nodes, from)
		cy.labels = append(cy.labels, benign(e.mask&allowed(i, i+1)))
	}
	return cy
}

// benign picks one type of a mask, non-rw ones first.
func benign(mask uint8) uint8 {
	for _, t := range []uint8{ww, wr, rt, rw} {
		if mask&t != 0 {
			return t
		}
	}
	return 0
}

// bfsPath is a shortest path from -> ... -> to (from == to: a cycle)
// over adj, or nil. A budget not below zero bounds the edges visited.
func bfsPath(adj [][]int32, from, to int, budget *int) []int {
	parent := map[int]int{from: -1}
	queue := []int{from}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, w32 := range adj[u] {
			w := int(w32)
			if *budget >= 0 {
				if *budget == 0 {
					return nil
				}
				*budget--
			}
			if w == to {
				return append(unwind(parent, u), to)
			}
			if _, seen := parent[w]; !seen {
				parent[w] = u
				queue = append(queue, w)
			}
		}
	}
	return nil
}

// unwind is the path from the root to u.
func unwind(parent map[int]int, u int) []int {
	var rev []int
	for ; u != -1; u = parent[u] {
		rev = append(rev, u)
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// classify names a cycle: G0 (ww only), G1c (ww and wr), G-single (one
// rw), G-nonadjacent (rw edges never adjacent), G2 (adjacent rw edges:
// write skew, allowed under snapshot isolation). A forbidden cycle that
// needs a real-time edge gets "-realtime".
func (cy *cycle) classify() (kind string, forbidden bool) {
	n := len(cy.labels)
	rws, adjacent, wrs, rts := 0, false, 0, 0
	for i, l := range cy.labels {
		switch l {
		case rw:
			rws++
			adjacent = adjacent || cy.labels[(i+1)%n] == rw
		case wr:
			wrs++
		case rt:
			rts++
		}
	}
	switch {
	case adjacent:
		return "G2", false
	case rws == 0 && wrs == 0:
		kind = "G0"
	case rws == 0:
		kind = "G1c"
	case rws == 1:
		kind = "G-single"
	default:
		kind = "G-nonadjacent"
	}
	if rts > 0 {
		kind += "-realtime"
	}
	return kind, true
}

// cycleAnomaly reports a cycle: its transactions in order and its edges.
func (la *listAppend) cycleAnomaly(g *depGraph, cy *cycle) Anomaly {
	kind, forbidden := cy.classify()
	var b strings.Builder
	ops := make([]Op, len(cy.nodes))
	for i, n := range cy.nodes {
		ops[i] = la.op(g.txns[n])
		next := cy.nodes[(i+1)%len(cy.nodes)]
		e := g.adj[n][g.index[uint64(n)<<32|uint64(next)]]
		fmt.Fprintf(&b, "%s -%s-> ", name(ops[i]), edgeName(e, cy.labels[i]))
	}
	b.WriteString(name(ops[0]))
	return Anomaly{Kind: kind, Forbidden: forbidden, Ops: ops, Explanation: b.String()}
}

func edgeName(e edge, label uint8) string {
	switch label {
	case ww:
		return "ww(" + e.key[0] + ")"
	case wr:
		return "wr(" + e.key[1] + ")"
	case rw:
		return "rw(" + e.key[2] + ")"
	}
	return "rt"
}
