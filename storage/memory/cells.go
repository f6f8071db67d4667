package memory

import (
	"cmp"
	"slices"

	"github.com/seed-992972ee/percolator/storage"
)

// famRow is one row's cells in one family.
//
// Invariant: cols is sorted by qualifier and holds no empty column; a
// famRow with no column is removed from its family.
type famRow struct {
	cols []column
}

// column is the versions of one (family, row, qualifier).
//
// Invariant: versions is sorted by ts descending, without duplicates, and
// every value is owned by the store (never shared with a caller).
type column struct {
	qualifier string
	versions  []version
}

type version struct {
	ts    uint64
	value []byte
}

func (r *famRow) find(qualifier string) (int, bool) {
	return slices.BinarySearchFunc(r.cols, qualifier, func(c column, q string) int {
		return cmp.Compare(c.qualifier, q)
	})
}

func (c *column) find(ts uint64) (int, bool) {
	return slices.BinarySearchFunc(c.versions, ts, func(v version, ts uint64) int {
		return cmp.Compare(ts, v.ts) // descending
	})
}

// put sets (qualifier, ts) to a copy of value.
func (r *famRow) put(qualifier string, ts uint64, value []byte) {
	i, ok := r.find(qualifier)
	if !ok {
		r.cols = slices.Insert(r.cols, i, column{qualifier: qualifier})
	}
	c := &r.cols[i]
	v := version{ts: ts, value: slices.Clone(value)}
	j, ok := c.find(ts)
	if ok {
		c.versions[j] = v
		return
	}
	c.versions = slices.Insert(c.versions, j, v)
}

// deleteCells removes the versions of qualifier within tr.
func (r *famRow) deleteCells(qualifier string, tr storage.TimeRange) {
	i, ok := r.find(qualifier)
	if !ok {
		return
	}
	c := &r.cols[i]
	c.versions = slices.DeleteFunc(c.versions, func(v version) bool { return tr.Contains(v.ts) })
	if len(c.versions) == 0 {
		r.cols = slices.Delete(r.cols, i, i+1)
	}
}

// group is the selectors of a filter that name one family.
type group struct {
	family string
	sels   []storage.Selector
	all    bool     // some selector has AllQualifiers
	quals  []string // sorted distinct qualifiers, when !all
}

// groupByFamily splits a filter by family, in family order.
func groupByFamily(f storage.Filter) []group {
	var gs []group
	for _, s := range f {
		i, ok := slices.BinarySearchFunc(gs, s.Family, func(g group, f string) int { return cmp.Compare(g.family, f) })
		if !ok {
			gs = slices.Insert(gs, i, group{family: s.Family})
		}
		g := &gs[i]
		g.sels = append(g.sels, s)
		g.all = g.all || s.AllQualifiers
		if j, ok := slices.BinarySearch(g.quals, s.Qualifier); !ok && !s.AllQualifiers {
			g.quals = slices.Insert(g.quals, j, s.Qualifier)
		}
	}
	return gs
}

// selectColumn calls emit for each version of c that some selector of g
// selects, newest first: a selector selects the newest Limit versions of the
// column within its time range. emit returning false stops it.
func (g *group) selectColumn(c *column, emit func(*version) bool) bool {
	var buf [8]int
	counts := buf[:0]
	if len(g.sels) > len(buf) {
		counts = make([]int, 0, len(g.sels))
	}
	counts = counts[:len(g.sels)]
	for i := range c.versions {
		v := &c.versions[i]
		if g.selects(c.qualifier, v.ts, counts) && !emit(v) {
			return false
		}
	}
	return true
}

// selects reports whether any selector selects the version at ts, counting
// it against each selector that does.
func (g *group) selects(qualifier string, ts uint64, counts []int) bool {
	selected := false
	for i := range g.sels {
		s := &g.sels[i]
		if (!s.AllQualifiers && s.Qualifier != qualifier) || !s.Time.Contains(ts) {
			continue
		}
		if s.Limit == 0 || counts[i] < s.Limit {
			counts[i]++
			selected = true
		}
	}
	return selected
}

// selectRow calls emit for each selected cell of r in g's family, in
// qualifier order then newest first. emit returning false stops it.
func (g *group) selectRow(r *famRow, emit func(*column, *version) bool) bool {
	visit := func(c *column) bool {
		return g.selectColumn(c, func(v *version) bool { return emit(c, v) })
	}
	if g.all {
		for i := range r.cols {
			if !visit(&r.cols[i]) {
				return false
			}
		}
		return true
	}
	for _, q := range g.quals {
		if i, ok := r.find(q); ok && !visit(&r.cols[i]) {
			return false
		}
	}
	return true
}
