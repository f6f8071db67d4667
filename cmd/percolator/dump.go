package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

func runDump(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dump", stderr)
	dir := fs.String("dir", "", "database directory")
	row := fs.String("row", "", "row to dump (default: every row, up to --limit)")
	limit := fs.Int("limit", 20, "rows to dump without --row")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openDir(ctx, *dir)
	if err != nil {
		return err
	}
	defer db.Close()
	rows := []string{*row}
	if *row == "" {
		if rows, err = db.Rows(ctx, "", *limit); err != nil {
			return err
		}
	}
	for _, r := range rows {
		cells, err := db.RawRow(ctx, r)
		if err != nil {
			return err
		}
		writeTable(stdout, r, cells)
	}
	return nil
}

// writeTable prints a row like the tables of the seeds' walk-through: per
// column, one line per timestamp, newest first, with its data, lock and
// write cells side by side.
func writeTable(w io.Writer, row string, cells []storage.Cell) {
	byCol := map[string]map[uint64]map[string]string{}
	for _, c := range cells {
		if byCol[c.Qualifier] == nil {
			byCol[c.Qualifier] = map[uint64]map[string]string{}
		}
		if byCol[c.Qualifier][c.TS] == nil {
			byCol[c.Qualifier][c.TS] = map[string]string{}
		}
		byCol[c.Qualifier][c.TS][c.Family] = strings.TrimPrefix(txn.FormatCell(c.Family, c.Value), c.Family+":")
	}
	cols := make([]string, 0, len(byCol))
	for c := range byCol {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	if len(cols) == 0 {
		fmt.Fprintf(w, "%s: no cells\n", row)
	}
	for _, col := range cols {
		fmt.Fprintf(w, "%-16s %-6s %-24s %-44s %s\n", "key", "ts", col+":data", col+":lock", col+":write")
		tss := make([]uint64, 0, len(byCol[col]))
		for ts := range byCol[col] {
			tss = append(tss, ts)
		}
		sort.Slice(tss, func(i, j int) bool { return tss[i] > tss[j] })
		for i, ts := range tss {
			key := ""
			if i == 0 {
				key = row
			}
			f := byCol[col][ts]
			fmt.Fprintf(w, "%-16s %-6d %-24s %-44s %s\n", key, ts, f[txn.FamilyData], f[txn.FamilyLock], f[txn.FamilyWrite])
		}
		fmt.Fprintln(w)
	}
}

func runLocks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("locks", stderr)
	dir := fs.String("dir", "", "database directory")
	resolve := fs.Bool("resolve", false, "settle the locks of committed, rolled-back, dead or expired transactions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	db, err := openDir(ctx, *dir)
	if err != nil {
		return err
	}
	defer db.Close()
	if *resolve {
		n, err := db.ResolveLocks(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "resolved %d locks\n", n)
	}
	locks, err := db.Locks(ctx)
	if err != nil {
		return err
	}
	for _, l := range locks {
		fmt.Fprintf(stdout, "%s/%s start_ts=%d %s primary=%s/%s owner=%s expires=%s\n", l.Row, l.Column, l.StartTS,
			l.Lock.Op, l.Lock.PrimaryRow, l.Lock.PrimaryCol, l.Lock.Owner, l.Expires.Format("15:04:05.000"))
	}
	fmt.Fprintf(stdout, "%d locks\n", len(locks))
	return nil
}

// openDir opens the database in dir, which must be given.
func openDir(ctx context.Context, dir string) (*percolator.DB, error) {
	if err := requireDir(dir); err != nil {
		return nil, err
	}
	return percolator.Open(ctx, percolator.Options{Dir: dir})
}
