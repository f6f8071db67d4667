package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/txn"
)

// dumpConfig is what `dump` shows.
type dumpConfig struct {
	tg            target
	row, prefix   string
	limit         int
	full, jsonOut bool
}

// shortValue is how many bytes of a formatted value dump shows without
// --full.
const shortValue = 60

// dumpCmd is `dump`: rows' data, lock and write columns by timestamp,
// decoded as the tables of the paper.
func dumpCmd() *cobra.Command {
	var cfg dumpConfig
	c := &cobra.Command{
		Use:   "dump",
		Short: "rows' data / lock / write columns by timestamp, decoded",
		Long: `Lay each row out like the tables of the paper's Bob/Joe walk-through:
per column, one line per timestamp, newest first, with its data, lock and
write cells side by side, records and the index's binary values decoded,
values cut at 60 bytes unless --full.`,
		Example: "  percolator dump --dir D --row Bob\n  percolator dump --dir D --prefix doc/ --limit 5 --full",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case cfg.limit < 1:
				return usagef("--limit must be at least 1")
			case cfg.row != "" && cfg.prefix != "":
				return usagef("--row and --prefix exclude each other")
			}
			if err := cfg.tg.validate(); err != nil {
				return err
			}
			ctx := c.Context()
			return withDB(ctx, &cfg.tg, func(db *percolator.DB) error { return dump(ctx, db, cfg, c.OutOrStdout()) })
		},
	}
	fs := c.Flags()
	cfg.tg.register(fs, "database directory")
	fs.StringVar(&cfg.prefix, "prefix", "", "dump the rows starting with this prefix (default: every row, up to --limit)")
	fs.StringVar(&cfg.row, "row", "", "dump this one row")
	fs.IntVar(&cfg.limit, "limit", 20, "rows to dump at most")
	fs.BoolVar(&cfg.full, "full", false, "show whole values (they are cut at 60 bytes otherwise)")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the cells as JSON")
	return c
}

func dump(ctx context.Context, db *percolator.DB, cfg dumpConfig, w io.Writer) error {
	rows, err := dumpRows(ctx, db, cfg)
	if err != nil {
		return err
	}
	var out []dumpedRow
	for _, r := range rows {
		cells, err := db.RawRow(ctx, r)
		if err != nil {
			return err
		}
		out = append(out, dumpedRow{Row: displayPath(r), Cells: cellFormat(cfg.full).Versions(cells)})
	}
	if cfg.jsonOut {
		if out == nil {
			out = []dumpedRow{}
		}
		return writeJSON(w, out)
	}
	for _, r := range out {
		r.print(w)
	}
	if len(out) == 0 {
		fmt.Fprintln(w, "no rows")
	}
	return nil
}

// dumpRows lists the rows to dump: the first cfg.limit rows with the
// prefix, in order.
func dumpRows(ctx context.Context, db *percolator.DB, cfg dumpConfig) ([]string, error) {
	if cfg.row != "" {
		return []string{cfg.row}, nil
	}
	// Rows merges the rows with a write record and those with a lock, each
	// up to the limit from the start: their union, sorted and cut, is the
	// first rows.
	rows, err := db.Rows(ctx, cfg.prefix, cfg.limit)
	if err != nil {
		return nil, err
	}
	slices.Sort(rows)
	rows = slices.Compact(rows)
	i := 0
	for i < len(rows) && i < cfg.limit && strings.HasPrefix(rows[i], cfg.prefix) {
		i++
	}
	return rows[:i], nil
}

// dumpedRow is a row as dump shows it: its versions as the paper's
// tables lay them out (txn.CellFormat.Versions).
type dumpedRow struct {
	Row   string            `json:"row"`
	Cells []txn.CellVersion `json:"cells"`
}

// cellFormat is how dump renders a protocol cell (txn's rendering, as the
// scenarios show it): values decoded by formatValue, the primary's row
// and column escaped as rows and columns print.
func cellFormat(full bool) txn.CellFormat {
	return txn.CellFormat{
		Value:  func(col string, v []byte) string { return formatValue(col, v, full) },
		Row:    displayPath,
		Column: displayText,
	}
}

// formatValue decodes the value of column col (one of the index's binary
// columns, an ack's timestamp, or else quoted bytes), cut to shortValue
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
	if full || len(s) <= shortValue {
		return s
	}
	cut := shortValue
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
