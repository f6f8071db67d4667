package graph

import (
	"context"
	"fmt"
	"sort"

	"github.com/seed-992972ee/percolator/storage"
)

// Report is what Check found: the edges it read, the locks it rolled
// forward, and every mismatch between the snapshot edges and the index
// edges or degrees (empty when the graph is consistent).
type Report struct {
	Edges      int      // live edges (snapshots)
	Locked     int      // snapshots locked by a live mutation, or changed while read, skipped
	Repaired   int      // expired locks rolled forward
	Mismatches []string // sorted
}

// Repair rolls forward the mutations of the edge's lock if it expired
// (their holder died or stalled): the reader-triggered repair. It reports
// whether it did.
func (g *Graph) Repair(ctx context.Context, label, src, tgt string) (bool, error) {
	l, err := g.Label(ctx, label)
	if err != nil {
		return false, err
	}
	if l.Consistency != Strong {
		return false, nil // no locks
	}
	row := snapshotRow(l.Name, src, tgt)
	s, ver, err := g.fetch(ctx, row)
	if err != nil || !s.locked() || !g.expired(&s) {
		return false, err
	}
	next := s
	next.Pending = append([]pending(nil), s.Pending...)
	next.LockedAt = g.nowMS()
	won, err := g.casSnapshot(ctx, row, ver, &next)
	if err != nil || !won {
		return false, err
	}
	_, err = g.drive(ctx, l, src, tgt, row, next, ver+1)
	return err == nil, err
}

// checker accumulates what the snapshot edges imply.
type checker struct {
	l       *Label
	want    map[string]string // index row → the edge that implies it
	degrees map[string]int64  // degree row → live edges
	live    int
}

func newChecker(l *Label) *checker {
	return &checker{l: l, want: map[string]string{}, degrees: map[string]int64{}}
}

// edgeKey names a snapshot edge.
type edgeKey struct{ src, tgt string }

// seenSnapshot is a snapshot edge as one scan read it.
type seenSnapshot struct {
	s   snapshot
	ver uint64
}

// scanSnapshots reads every snapshot edge of l, by edge, reporting the
// corrupt ones.
func (g *Graph) scanSnapshots(ctx context.Context, l *Label, rep *Report) (map[edgeKey]seenSnapshot, error) {
	out := map[edgeKey]seenSnapshot{}
	sp := appendPart([]byte(rowPrefix+"s/"), l.Name)
	err := g.store.Scan(ctx, sp, storage.PrefixEnd(sp), storage.Filter{{Family: Family, Qualifier: qualSnapshot, Limit: 1}}, 0, func(r storage.Row) bool {
		rest := r.Key[len(sp):]
		src, rest, ok1 := readPart(rest)
		tgt, _, ok2 := readPart(rest)
		s, derr := decodeSnapshot(r.Cells[0].Value)
		if !ok1 || !ok2 || derr != nil {
			if rep != nil {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("corrupt snapshot row %q", r.Key))
			}
			return true
		}
		out[edgeKey{src, tgt}] = seenSnapshot{s, r.Cells[0].TS}
		return true
	})
	return out, err
}

// Check verifies every index of label against its snapshot edges, and
// every degree against the live edges, rolling expired locks forward
// first. The snapshots are read before the index edges and degrees and
// again after: an edge locked by a live mutation, or changed between the
// two reads (a mutation ran meanwhile), is skipped with the index edges
// and degrees it may change (Report.Locked); every other edge was still
// while its index edges and degrees were read, so a mismatch of it is
// real.
func (g *Graph) Check(ctx context.Context, label string) (Report, error) {
	l, err := g.Label(ctx, label)
	if err != nil {
		return Report{}, err
	}
	if l.Consistency == Txn {
		return g.checkTxn(ctx, l)
	}
	var rep Report
	before, err := g.scanSnapshots(ctx, l, &rep)
	if err != nil {
		return rep, err
	}
	// Roll expired locks forward, then read those edges again.
	for k, seen := range before {
		if !seen.s.locked() {
			continue
		}
		did, err := g.Repair(ctx, l.Name, k.src, k.tgt)
		if err != nil {
			return rep, err
		}
		if did {
			rep.Repaired++
		}
		s, ver, err := g.fetch(ctx, snapshotRow(l.Name, k.src, k.tgt))
		if err != nil {
			return rep, err
		}
		before[k] = seenSnapshot{s, ver}
	}
	// The index edges and the degrees.
	ip := appendPart([]byte(rowPrefix+"i/"), l.Name)
	index := map[string]edgeKey{}
	var corrupt []string
	err = g.store.Scan(ctx, ip, storage.PrefixEnd(ip), indexFilter(l), 0, func(r storage.Row) bool {
		if _, present := indexPresent(r.Cells); !present {
			return true
		}
		k, ok := indexRowEdge(r.Key, l)
		if !ok {
			corrupt = append(corrupt, fmt.Sprintf("corrupt index row %q", r.Key))
		}
		index[string(r.Key)] = k
		return true
	})
	if err != nil {
		return rep, err
	}
	dp := appendPart([]byte(rowPrefix+"d/"), l.Name)
	q := qualCount
	if l.Consistency == Weak {
		q = qualWeakCount
	}
	got := map[string]int64{}
	err = g.store.Scan(ctx, dp, storage.PrefixEnd(dp), storage.Filter{{Family: Family, Qualifier: q, Limit: 1}}, 0, func(r storage.Row) bool {
		got[string(r.Key)] = decodeCount(r.Cells[0].Value)
		return true
	})
	if err != nil {
		return rep, err
	}
	after, err := g.scanSnapshots(ctx, l, nil)
	if err != nil {
		return rep, err
	}
	// Edges locked or changed between the reads are skipped, with their
	// degrees.
	c := newChecker(l)
	moving := map[edgeKey]bool{}
	skipDeg := map[string]bool{}
	for k := range mergeEdges(before, after) {
		b, inB := before[k]
		a, inA := after[k]
		if inB && inA && b.ver == a.ver && !b.s.locked() {
			c.expect(k.src, k.tgt, &b.s)
			continue
		}
		moving[k] = true
		rep.Locked++
		skipDeg[string(degreeRow(l.Name, Out, k.src))] = true
		skipDeg[string(degreeRow(l.Name, In, k.tgt))] = true
	}
	rep.Edges = c.live
	rep.Mismatches = append(rep.Mismatches, corrupt...)
	rep.Mismatches = append(rep.Mismatches, c.mismatches(index, moving, got, skipDeg)...)
	sort.Strings(rep.Mismatches)
	return rep, nil
}

func mergeEdges(a, b map[edgeKey]seenSnapshot) map[edgeKey]bool {
	m := map[edgeKey]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// indexRowEdge is the edge whose index row key is.
func indexRowEdge(key []byte, l *Label) (edgeKey, bool) {
	rest := key[len(appendPart([]byte(rowPrefix+"i/"), l.Name)):]
	name, rest, ok := readPart(rest)
	ix, found := l.index(name)
	if !ok || !found || len(rest) == 0 {
		return edgeKey{}, false
	}
	dir := rest[0]
	vertex, _, ok := readPart(rest[1:])
	other, ok2 := otherVertex(key, l, ix)
	switch {
	case !ok || !ok2:
		return edgeKey{}, false
	case dir == Out:
		return edgeKey{vertex, other}, true
	case dir == In:
		return edgeKey{other, vertex}, true
	}
	return edgeKey{}, false
}

// mismatches compares what the snapshots imply (c) with the index rows
// read (row → its edge) and the degree counts read (row → count): every
// index row wanted and every wanted one present, every count equal to its
// live edges. Index rows of the edges in moving, and the degree rows in
// skipDeg, are in flight and not compared.
func (c *checker) mismatches(index map[string]edgeKey, moving map[edgeKey]bool, got map[string]int64, skipDeg map[string]bool) []string {
	var out []string
	for row, k := range index {
		if _, ok := c.want[row]; !ok && !moving[k] {
			out = append(out, fmt.Sprintf("index edge %q has no live snapshot edge", row))
		}
	}
	for row, e := range c.want {
		if _, ok := index[row]; !ok {
			out = append(out, fmt.Sprintf("edge %s is missing from index row %q", e, row))
		}
	}
	for k := range mergeKeys(got, c.degrees) {
		if !skipDeg[k] && got[k] != c.degrees[k] {
			out = append(out, fmt.Sprintf("degree row %q counts %d, %d live edges", k, got[k], c.degrees[k]))
		}
	}
	return out
}

func mergeKeys(a, b map[string]int64) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// expect records the index rows and degrees the snapshot of (src, tgt)
// implies (it is not locked).
func (c *checker) expect(src, tgt string, s *snapshot) {
	l := c.l
	dirs := [2]struct {
		dir           byte
		vertex, other string
	}{{Out, src, tgt}, {In, tgt, src}}
	name := fmt.Sprintf("%s -%s-> %s", src, l.Name, tgt)
	if !s.Edge.live() {
		return
	}
	c.live++
	for i := range l.Indexes {
		for _, d := range dirs {
			c.want[string(indexRow(l.Name, &l.Indexes[i], d.dir, d.vertex, d.other, s.Edge.props()))] = name
		}
	}
	for _, d := range dirs {
		c.degrees[string(degreeRow(l.Name, d.dir, d.vertex))]++
	}
}
