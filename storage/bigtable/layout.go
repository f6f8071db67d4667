package bigtable

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	bt "cloud.google.com/go/bigtable"

	"github.com/seed-992972ee/percolator/storage"
)

// A cell (family f, qualifier q, timestamp ts) is stored in the Bigtable
// family Family, under the qualifier f NUL q, at ts×1000 microseconds.
// Family names hold no NUL (storage.ValidateFamily), so the qualifier is
// unambiguous, and its bytewise order is the model's order: by family,
// then qualifier (a family that is a prefix of another sorts first, as NUL
// is the least byte).

// column returns the stored qualifier of (family, qualifier).
func column(family, qualifier string) string {
	return family + "\x00" + qualifier
}

// splitColumn inverts column.
func splitColumn(col string) (family, qualifier string, ok bool) {
	i := strings.IndexByte(col, 0)
	if i < 0 {
		return "", "", false
	}
	return col[:i], col[i+1:], true
}

// micros returns the cell time of ts (ts <= MaxTimestamp).
func micros(ts uint64) bt.Timestamp { return bt.Timestamp(ts * 1000) }

// rangeMicros maps [start, end) onto cell times; ok is false when the
// range selects nothing storable. end 0 (or beyond MaxTimestamp) is
// unbounded, as Bigtable's 0.
func rangeMicros(r storage.TimeRange) (start, end bt.Timestamp, ok bool) {
	if r.Start > MaxTimestamp || (r.End != 0 && r.End <= r.Start) {
		return 0, 0, false
	}
	start = micros(r.Start)
	if r.End != 0 && r.End <= MaxTimestamp {
		end = micros(r.End)
	}
	return start, end, true
}

// toFilter turns a model filter into a Bigtable row filter: the
// interleave of one chain per selector. A filter that selects nothing is
// BlockAll (a nil Bigtable filter would select everything).
func toFilter(f storage.Filter) bt.Filter {
	chains := make([]bt.Filter, 0, len(f))
	for i := range f {
		if c, ok := selectorFilter(&f[i]); ok {
			chains = append(chains, c)
		}
	}
	switch len(chains) {
	case 0:
		return bt.BlockAllFilter()
	case 1:
		return chains[0]
	}
	return bt.InterleaveFilters(chains...)
}

func selectorFilter(s *storage.Selector) (bt.Filter, bool) {
	start, end, ok := rangeMicros(s.Time)
	if !ok {
		return nil, false
	}
	var cols bt.Filter
	if s.AllQualifiers {
		cols = bt.ColumnRangeFilter(Family, s.Family+"\x00", s.Family+"\x01")
	} else {
		c := column(s.Family, s.Qualifier)
		cols = bt.ColumnRangeFilter(Family, c, c+"\x00")
	}
	chain := []bt.Filter{cols}
	if s.Time != (storage.TimeRange{}) {
		chain = append(chain, bt.TimestampRangeFilterMicros(start, end))
	}
	if s.Limit > 0 {
		chain = append(chain, bt.LatestNFilter(s.Limit))
	}
	if len(chain) == 1 {
		return chain[0], true
	}
	return bt.ChainFilters(chain...), true
}

// toMutation turns model mutations into one Bigtable mutation of n
// operations: a delete of a time range nothing can be stored in is
// dropped, and Bigtable refuses a mutation of no operations.
func toMutation(ms []storage.Mutation) (m *bt.Mutation, n int) {
	m = bt.NewMutation()
	for i := range ms {
		x := &ms[i]
		switch x.Kind {
		case storage.Put:
			m.Set(Family, column(x.Family, x.Qualifier), micros(x.TS), slices.Clone(x.Value))
		case storage.DeleteCells:
			start, end, ok := rangeMicros(x.Time)
			if !ok {
				continue
			}
			if start == 0 && end == 0 {
				m.DeleteCellsInColumn(Family, column(x.Family, x.Qualifier))
			} else {
				m.DeleteTimestampRange(Family, column(x.Family, x.Qualifier), start, end)
			}
		case storage.DeleteRow:
			m.DeleteRow()
		}
		n++
	}
	return m, n
}

// checkTimestamps refuses a Put above MaxTimestamp, which the generic
// validation (storage.MaxTimestamp) lets through.
func checkTimestamps(ms []storage.Mutation) error {
	for i := range ms {
		if ms[i].Kind == storage.Put && ms[i].TS > MaxTimestamp {
			return fmt.Errorf("%w: timestamp %d exceeds the Bigtable backend's MaxTimestamp %d", storage.ErrInvalidArgument, ms[i].TS, uint64(MaxTimestamp))
		}
	}
	return nil
}

// fromRow turns a Bigtable row into a model row: cells by family,
// qualifier, then timestamp descending, without the duplicates an
// interleave of overlapping selectors returns.
func fromRow(key []byte, r bt.Row) (storage.Row, error) {
	items := r[Family]
	out := storage.Row{Key: key, Cells: make([]storage.Cell, 0, len(items))}
	for _, it := range items {
		col := strings.TrimPrefix(it.Column, Family+":")
		f, q, ok := splitColumn(col)
		if !ok || it.Timestamp < 0 || it.Timestamp%1000 != 0 {
			return storage.Row{}, fmt.Errorf("bigtable: row %q holds a cell %q@%d that percolator did not write", key, it.Column, it.Timestamp)
		}
		out.Cells = append(out.Cells, storage.Cell{Family: f, Qualifier: q, TS: uint64(it.Timestamp) / 1000, Value: it.Value})
	}
	slices.SortStableFunc(out.Cells, func(a, b storage.Cell) int {
		if c := strings.Compare(a.Family, b.Family); c != 0 {
			return c
		}
		if c := strings.Compare(a.Qualifier, b.Qualifier); c != 0 {
			return c
		}
		switch {
		case a.TS > b.TS:
			return -1
		case a.TS < b.TS:
			return 1
		}
		return 0
	})
	out.Cells = slices.CompactFunc(out.Cells, func(a, b storage.Cell) bool {
		return a.TS == b.TS && a.Family == b.Family && a.Qualifier == b.Qualifier && bytes.Equal(a.Value, b.Value)
	})
	return out, nil
}
