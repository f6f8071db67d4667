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
	Locked     int      // snapshots locked by a live mutation, skipped
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
	if err != nil || !s.locked() || g.nowMS()-s.LockedAt <= g.opts.LockExpiry.Milliseconds() {
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
	skip    map[string]bool   // index rows a locked edge may occupy
	degrees map[string]int64  // degree row → live edges
	skipDeg map[string]bool   // degree rows a locked edge may change
	live    int
	locked  int
}

// Check verifies every index of label against its snapshot edges, and
// every degree against the live edges, rolling expired locks forward
// first. Edges locked by a live mutation are skipped (Report.Locked), with
// the rows and degrees they may change.
func (g *Graph) Check(ctx context.Context, label string) (Report, error) {
	l, err := g.Label(ctx, label)
	if err != nil {
		return Report{}, err
	}
	if l.Consistency == Txn {
		return g.checkTxn(ctx, l)
	}
	var rep Report
	c := &checker{l: l, want: map[string]string{}, skip: map[string]bool{}, degrees: map[string]int64{}, skipDeg: map[string]bool{}}
	sp := appendPart([]byte(rowPrefix+"s/"), l.Name)
	type key struct{ src, tgt string }
	var locked []key
	err = g.store.Scan(ctx, sp, prefixEnd(sp), storage.Filter{{Family: Family, Qualifier: qualSnapshot, Limit: 1}}, 0, func(r storage.Row) bool {
		rest := r.Key[len(sp):]
		src, rest, ok1 := readPart(rest)
		tgt, _, ok2 := readPart(rest)
		s, derr := decodeSnapshot(r.Cells[0].Value)
		if !ok1 || !ok2 || derr != nil {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("corrupt snapshot row %q", r.Key))
			return true
		}
		if s.locked() {
			locked = append(locked, key{src, tgt})
			return true
		}
		c.expect(src, tgt, &s)
		return true
	})
	if err != nil {
		return rep, err
	}
	// Roll expired locks forward, then read those edges again.
	for _, k := range locked {
		did, err := g.Repair(ctx, l.Name, k.src, k.tgt)
		if err != nil {
			return rep, err
		}
		if did {
			rep.Repaired++
		}
		s, _, err := g.fetch(ctx, snapshotRow(l.Name, k.src, k.tgt))
		if err != nil {
			return rep, err
		}
		c.expect(k.src, k.tgt, &s)
	}
	rep.Edges, rep.Locked = c.live, c.locked
	// Every index row must be wanted, and every wanted row present.
	ip := appendPart([]byte(rowPrefix+"i/"), l.Name)
	seen := map[string]bool{}
	err = g.store.Scan(ctx, ip, prefixEnd(ip), storage.Filter{{Family: Family, Qualifier: qualEdge, Limit: 1}}, 0, func(r storage.Row) bool {
		k := string(r.Key)
		seen[k] = true
		if _, ok := c.want[k]; !ok && !c.skip[k] {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("index edge %q has no live snapshot edge", r.Key))
		}
		return true
	})
	if err != nil {
		return rep, err
	}
	for k, e := range c.want {
		if !seen[k] && !c.skip[k] {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("edge %s is missing from index row %q", e, k))
		}
	}
	// Degrees: the count of every degree row equals its live edges.
	dp := appendPart([]byte(rowPrefix+"d/"), l.Name)
	q := qualCount
	if l.Consistency == Weak {
		q = qualWeakCount
	}
	got := map[string]int64{}
	err = g.store.Scan(ctx, dp, prefixEnd(dp), storage.Filter{{Family: Family, Qualifier: q, Limit: 1}}, 0, func(r storage.Row) bool {
		got[string(r.Key)] = decodeCount(r.Cells[0].Value)
		return true
	})
	if err != nil {
		return rep, err
	}
	for k := range mergeKeys(got, c.degrees) {
		if !c.skipDeg[k] && got[k] != c.degrees[k] {
			rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("degree row %q counts %d, %d live edges", k, got[k], c.degrees[k]))
		}
	}
	sort.Strings(rep.Mismatches)
	return rep, nil
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
// implies; for a locked one, the rows and degrees it may change instead.
func (c *checker) expect(src, tgt string, s *snapshot) {
	l := c.l
	dirs := [2]struct {
		dir           byte
		vertex, other string
	}{{Out, src, tgt}, {In, tgt, src}}
	name := fmt.Sprintf("%s -%s-> %s", src, l.Name, tgt)
	if s.locked() {
		c.locked++
		states := []edgeState{s.Edge}
		for _, p := range s.Pending {
			states = append(states, states[len(states)-1].apply(&p.M))
		}
		for _, st := range states {
			for i := range l.Indexes {
				for _, d := range dirs {
					c.skip[string(indexRow(l.Name, &l.Indexes[i], d.dir, d.vertex, d.other, st.props()))] = true
				}
			}
		}
		for _, d := range dirs {
			c.skipDeg[string(degreeRow(l.Name, d.dir, d.vertex))] = true
		}
		return
	}
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
