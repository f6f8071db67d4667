package pebble

import (
	"cmp"
	"slices"

	"github.com/seed-992972ee/percolator/storage"
)

// group is the selectors of a filter that name one family: one family is
// one keyspace, read with one iterator range.
type group struct {
	family string
	sels   []storage.Selector // sorted by qualifier
	all    bool               // some selector has AllQualifiers
}

// groupByFamily splits a filter by family, in family order. The groups
// share one sorted copy of the filter.
func groupByFamily(f storage.Filter) []group {
	if len(f) == 0 {
		return nil
	}
	sorted := slices.Clone(f)
	slices.SortFunc(sorted, func(a, b storage.Selector) int {
		return cmp.Or(cmp.Compare(a.Family, b.Family), cmp.Compare(a.Qualifier, b.Qualifier))
	})
	gs := make([]group, 0, 1)
	for i := 0; i < len(sorted); {
		g := group{family: sorted[i].Family}
		j := i
		for ; j < len(sorted) && sorted[j].Family == g.family; j++ {
			g.all = g.all || sorted[j].AllQualifiers
		}
		g.sels = sorted[i:j]
		gs = append(gs, g)
		i = j
	}
	return gs
}

// eachQualifier calls fn for each distinct qualifier the selectors name,
// in order, until fn returns false. Only for groups without AllQualifiers.
func (g *group) eachQualifier(fn func(string) bool) {
	for i := range g.sels {
		if i > 0 && g.sels[i].Qualifier == g.sels[i-1].Qualifier {
			continue
		}
		if !fn(g.sels[i].Qualifier) {
			return
		}
	}
}

func (s *group) applies(i int, qualifier string) bool {
	return s.sels[i].AllQualifiers || s.sels[i].Qualifier == qualifier
}

// seekTS returns the newest timestamp any selector of the column could
// select, so a reader can seek past the newer versions.
func (g *group) seekTS(qualifier string) uint64 {
	var end uint64
	for i := range g.sels {
		if !g.applies(i, qualifier) {
			continue
		}
		if g.sels[i].Time.End == 0 {
			return storage.MaxTimestamp + 1
		}
		end = max(end, g.sels[i].Time.End)
	}
	if end == 0 {
		return 0
	}
	return end - 1
}

// selects reports whether the version at ts (visited newest first) is
// selected, counting it against each selector that selects it, and whether
// any selector could still select an older version of the column.
func (g *group) selects(qualifier string, ts uint64, counts []int) (selected, more bool) {
	for i := range g.sels {
		s := &g.sels[i]
		if !g.applies(i, qualifier) || (s.Limit > 0 && counts[i] >= s.Limit) {
			continue
		}
		if s.Time.Contains(ts) {
			counts[i]++
			selected = true
		}
		if s.Time.Start < ts && (s.Limit == 0 || counts[i] < s.Limit) {
			more = true
		}
	}
	return selected, more
}

// exactCell reports whether the filter names one cell: one selector, one
// qualifier, one timestamp. Such a read is a point Get.
func exactCell(f storage.Filter) (storage.Selector, bool) {
	if len(f) != 1 {
		return storage.Selector{}, false
	}
	s := f[0]
	return s, !s.AllQualifiers && s.Time.End != 0 && s.Time.End == s.Time.Start+1
}
