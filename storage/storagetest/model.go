package storagetest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/seed-992972ee/percolator/storage"
)

// model is a deliberately naive reference store: a map of rows to cells,
// sorted and filtered from scratch on every read. It shares no code with
// any backend. It is not safe for concurrent use.
type model struct {
	rows map[string][]storage.Cell
}

func newModel() *model { return &model{rows: make(map[string][]storage.Cell)} }

// apply applies valid mutations to row.
func (m *model) apply(row []byte, ms []storage.Mutation) {
	for _, mu := range ms {
		m.applyOne(string(row), mu)
	}
	if len(m.rows[string(row)]) == 0 {
		delete(m.rows, string(row))
	}
}

func (m *model) applyOne(row string, mu storage.Mutation) {
	cells := m.rows[row]
	switch mu.Kind {
	case storage.Put:
		cells = slices.DeleteFunc(cells, func(c storage.Cell) bool {
			return c.Family == mu.Family && c.Qualifier == mu.Qualifier && c.TS == mu.TS
		})
		cells = append(cells, storage.Cell{Family: mu.Family, Qualifier: mu.Qualifier, TS: mu.TS, Value: slices.Clone(mu.Value)})
	case storage.DeleteCells:
		cells = slices.DeleteFunc(cells, func(c storage.Cell) bool {
			return c.Family == mu.Family && c.Qualifier == mu.Qualifier && mu.Time.Contains(c.TS)
		})
	case storage.DeleteRow:
		cells = nil
	}
	m.rows[row] = cells
}

// increment mirrors Store.Increment; ok is false for a non-8-byte value.
func (m *model) increment(row []byte, family, qualifier string, delta int64) (sum int64, ok bool) {
	got := m.read(row, storage.Filter{{Family: family, Qualifier: qualifier, Limit: 1}})
	if len(got) == 1 {
		if len(got[0].Value) != 8 {
			return 0, false
		}
		sum = int64(binary.BigEndian.Uint64(got[0].Value))
	}
	sum += delta
	m.apply(row, []storage.Mutation{
		{Kind: storage.DeleteCells, Family: family, Qualifier: qualifier},
		storage.SetCell(family, qualifier, 0, binary.BigEndian.AppendUint64(nil, uint64(sum))),
	})
	return sum, true
}

// compareCells is the order of Row.Cells.
func compareCells(a, b storage.Cell) int {
	if c := cmp.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Qualifier, b.Qualifier); c != 0 {
		return c
	}
	return cmp.Compare(b.TS, a.TS)
}

// read returns the cells of row selected by f.
func (m *model) read(row []byte, f storage.Filter) []storage.Cell {
	cells := slices.Clone(m.rows[string(row)])
	slices.SortFunc(cells, compareCells)
	type counter struct {
		sel       int
		fam, qual string
	}
	counts := map[counter]int{}
	var out []storage.Cell
	for _, c := range cells {
		selected := false
		for i, s := range f {
			if !storage.Filter([]storage.Selector{s}).Matches(&c) {
				continue
			}
			k := counter{i, c.Family, c.Qualifier}
			if s.Limit == 0 || counts[k] < s.Limit {
				counts[k]++
				selected = true
			}
		}
		if selected {
			out = append(out, c)
		}
	}
	return out
}

// scan returns the rows Store.Scan would deliver.
func (m *model) scan(start, end []byte, f storage.Filter, limit int) []storage.Row {
	var keys []string
	for k := range m.rows {
		if k >= string(start) && (len(end) == 0 || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var rows []storage.Row
	for _, k := range keys {
		if cells := m.read([]byte(k), f); len(cells) > 0 {
			rows = append(rows, storage.Row{Key: []byte(k), Cells: cells})
		}
		if limit > 0 && len(rows) == limit {
			break
		}
	}
	return rows
}

// cellsEqual compares cell lists, treating nil and empty values alike.
func cellsEqual(a, b []storage.Cell) bool {
	return slices.EqualFunc(a, b, func(x, y storage.Cell) bool {
		return x.Family == y.Family && x.Qualifier == y.Qualifier && x.TS == y.TS && bytes.Equal(x.Value, y.Value)
	})
}

func rowsEqual(a, b []storage.Row) bool {
	return slices.EqualFunc(a, b, func(x, y storage.Row) bool {
		return bytes.Equal(x.Key, y.Key) && cellsEqual(x.Cells, y.Cells)
	})
}
