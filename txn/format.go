package txn

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-992972ee/percolator/storage"
)

// FormatCell renders a protocol cell for humans as the test scenarios
// show it, family first: `lock:put primary@Bob/bal owner=w`,
// `write:put data@3`, `data:"$10"`. It renders with CellFormat's zero
// value; percolator dump renders with a CellFormat that decodes values and
// escapes names, in the same vocabulary.
func FormatCell(family string, value []byte) string {
	return family + ":" + CellFormat{}.Format(family, "", value)
}

// CellFormat renders protocol cells for humans (percolator dump and the
// test scenarios, through FormatCell) in the vocabulary of the paper's
// tables: a lock cell its op, the primary it points at and its owner; a
// write cell "rollback", "lock start@" and the start_ts of a lock-only
// record, or its op and the start_ts its data is at; a data cell its
// value, and a lock or write record the value it inlines. A record that
// does not decode renders as "<corrupt>". The zero value renders values
// Go-quoted and names as they are.
type CellFormat struct {
	// Value renders a value of column col: a data cell's, or one a lock
	// or write record inlines. Nil: Go-quoted (%q).
	Value func(col string, v []byte) string
	// Row and Column render the row and column of the primary a lock
	// points at (user bytes, which need not be printable). Nil: as they
	// are.
	Row, Column func(string) string
}

// Format renders the cell of family (FamilyLock, FamilyWrite or a data
// family) in column col holding value.
func (f CellFormat) Format(family, col string, value []byte) string {
	switch family {
	case FamilyLock:
		l, err := decodeLock(value)
		if err != nil {
			return "<corrupt>"
		}
		return f.lock(col, &l)
	case FamilyWrite:
		w, err := DecodeWrite(value)
		if err != nil {
			return "<corrupt>"
		}
		return f.write(col, &w)
	}
	return f.value(col, value)
}

func (f CellFormat) lock(col string, l *Lock) string {
	s := fmt.Sprintf("%s primary@%s/%s owner=%s", l.Op, f.name(f.Row, string(l.PrimaryRow)), f.name(f.Column, l.PrimaryCol), l.Owner)
	if l.Inline {
		s += " value=" + f.value(col, l.Value)
	}
	return s
}

func (f CellFormat) write(col string, w *Write) string {
	switch w.Op {
	case OpRollback:
		return "rollback"
	case OpLock:
		return fmt.Sprintf("lock start@%d", w.StartTS)
	}
	s := fmt.Sprintf("%s data@%d", w.Op, w.StartTS)
	if w.Inline {
		s += " value=" + f.value(col, w.Value)
	}
	return s
}

func (f CellFormat) value(col string, v []byte) string {
	if f.Value == nil {
		return fmt.Sprintf("%q", v)
	}
	return f.Value(col, v)
}

// CellVersion is one version of one column of a row as the paper's
// tables show it: the column, the timestamp, and the data, lock and write
// cells at that timestamp, each rendered ("" where there is none).
type CellVersion struct {
	Column string `json:"column"`
	TS     uint64 `json:"ts"`
	Data   string `json:"data,omitempty"`
	Lock   string `json:"lock,omitempty"`
	Write  string `json:"write,omitempty"`

	col string // the column as stored, which the order follows
}

// Versions lays a row's protocol cells (DB.RawRow) out as the paper's
// tables: per column, in column order, one CellVersion per timestamp,
// newest first, with its data, lock and write cells side by side. Cells
// of other families are left out; column names are rendered by Column.
func (f CellFormat) Versions(cells []storage.Cell) []CellVersion {
	type key struct {
		col string
		ts  uint64
	}
	out := []CellVersion{}
	idx := map[key]int{}
	for _, c := range cells {
		if c.Family != FamilyData && c.Family != FamilyLock && c.Family != FamilyWrite {
			continue
		}
		k := key{c.Qualifier, c.TS}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, CellVersion{Column: f.name(f.Column, c.Qualifier), TS: c.TS, col: c.Qualifier})
		}
		v, rendered := &out[i], f.Format(c.Family, c.Qualifier, c.Value)
		switch c.Family {
		case FamilyData:
			v.Data = rendered
		case FamilyLock:
			v.Lock = rendered
		default:
			v.Write = rendered
		}
	}
	slices.SortStableFunc(out, func(a, b CellVersion) int {
		if c := strings.Compare(a.col, b.col); c != 0 {
			return c
		}
		return -cmp.Compare(a.TS, b.TS)
	})
	return out
}

func (CellFormat) name(render func(string) string, s string) string {
	if render == nil {
		return s
	}
	return render(s)
}
