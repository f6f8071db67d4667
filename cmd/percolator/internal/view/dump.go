package view

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// ShortValue is how many bytes of a formatted value Dump shows unless
// DumpOptions.Full.
const ShortValue = 60

// DumpOptions says which rows Dump shows, and how.
type DumpOptions struct {
	Row    string // this one row, or
	Prefix string // the first Limit rows starting with Prefix
	Limit  int
	Full   bool // whole values, not cut at ShortValue bytes
	JSON   bool
}

// Dump prints rows' data, lock and write columns by timestamp, decoded,
// as the tables of the paper's walk-through (or as JSON).
func Dump(ctx context.Context, db *percolator.DB, o DumpOptions, w io.Writer) error {
	rows, err := dumpRows(ctx, db, o)
	if err != nil {
		return err
	}
	var out []dumpedRow
	var js []dumpedRowJSON
	for _, r := range rows {
		cells, err := db.RawRow(ctx, r)
		if err != nil {
			return err
		}
		vs := cellFormat(o.Full).Versions(cells)
		if o.JSON {
			js = append(js, dumpedRowOf(r, vs, cells, o.Full))
			continue
		}
		out = append(out, dumpedRow{Row: Path(r), Cells: vs})
	}
	if o.JSON {
		if js == nil {
			js = []dumpedRowJSON{}
		}
		return JSON(w, js)
	}
	for _, r := range out {
		r.print(w)
	}
	if len(out) == 0 {
		fmt.Fprintln(w, "no rows")
	}
	return nil
}

// dumpRows lists the rows to dump: the first o.Limit rows with the
// prefix, in order.
func dumpRows(ctx context.Context, db *percolator.DB, o DumpOptions) ([]string, error) {
	if o.Row != "" {
		return []string{o.Row}, nil
	}
	// Rows merges the rows with a write record and those with a lock, each
	// up to the limit from the start: their union, sorted and cut, is the
	// first rows.
	rows, err := db.Rows(ctx, o.Prefix, o.Limit)
	if err != nil {
		return nil, err
	}
	slices.Sort(rows)
	rows = slices.Compact(rows)
	i := 0
	for i < len(rows) && i < o.Limit && strings.HasPrefix(rows[i], o.Prefix) {
		i++
	}
	return rows[:i], nil
}

// dumpedRow is a row as dump shows it: its versions as the paper's
// tables lay them out (txn.CellFormat.Versions).
type dumpedRow struct {
	Row   string
	Cells []txn.CellVersion
}

// dumpedRowJSON is a row as `dump --json` prints it: the row key and each
// column as user bytes, the cells as the text renders them.
type dumpedRowJSON struct {
	Row   UserBytes         `json:"row"`
	Cells []cellVersionJSON `json:"cells"`
}

func (r dumpedRowJSON) MarshalJSON() ([]byte, error) { return marshalFlat(r) }

type cellVersionJSON struct {
	Column UserBytes `json:"column"`
	TS     uint64    `json:"ts"`
	Data   string    `json:"data,omitempty"`
	Lock   string    `json:"lock,omitempty"`
	Write  string    `json:"write,omitempty"`
}

func (c cellVersionJSON) MarshalJSON() ([]byte, error) { return marshalFlat(c) }

// dumpedRowOf is row's versions vs for JSON, with each column as stored:
// vs rendered again with the columns as they are (the same versions in
// the same order; only the columns' rendering differs).
func dumpedRowOf(row string, vs []txn.CellVersion, cells []storage.Cell, full bool) dumpedRowJSON {
	raw := cellFormat(full)
	raw.Column = func(c string) string { return c }
	cols := raw.Versions(cells)
	j := dumpedRowJSON{Row: UserBytes(row), Cells: []cellVersionJSON{}}
	for i, v := range vs {
		j.Cells = append(j.Cells, cellVersionJSON{UserBytes(cols[i].Column), v.TS, v.Data, v.Lock, v.Write})
	}
	return j
}

// cellFormat is how dump renders a protocol cell (txn's rendering, as the
// scenarios show it): values decoded by formatValue, the primary's row
// and column escaped as rows and columns print.
func cellFormat(full bool) txn.CellFormat {
	return txn.CellFormat{
		Value:  func(col string, v []byte) string { return formatValue(col, v, full) },
		Row:    Path,
		Column: Text,
	}
}

// formatValue decodes the value of column col (one of the index's binary
// columns, an ack's timestamp, or else quoted bytes), cut to ShortValue
// bytes unless full.
func formatValue(col string, v []byte, full bool) string {
	s, ok := docindex.FormatValue(col, v)
	switch {
	case ok:
	case strings.HasPrefix(col, txn.ReservedPrefix+"ack:") && len(v) == 8:
		s = fmt.Sprintf("acked run@%d", binary.BigEndian.Uint64(v))
	default:
		s = fmt.Sprintf("%q", v)
	}
	if full || len(s) <= ShortValue {
		return s
	}
	cut := ShortValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes; --full)", s[:cut], len(v))
}

// print prints the row as a table in the manner of the seeds'
// walk-through: per column, one line per timestamp, newest first, with
// its data, lock and write cells side by side.
func (r dumpedRow) print(w io.Writer) {
	fmt.Fprintln(w, r.Row)
	if len(r.Cells) == 0 {
		fmt.Fprint(w, "  no cells\n\n")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  COLUMN\tTS\tDATA\tLOCK\tWRITE")
	for i, c := range r.Cells {
		col := c.Column
		if i > 0 && col == r.Cells[i-1].Column {
			col = ""
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", col, c.TS, c.Data, c.Lock, c.Write)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}
