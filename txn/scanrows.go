package txn

import (
	"context"
	"fmt"
	"strings"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// RowCell is one cell ScanRows returns: the value of a user column of a
// row.
type RowCell struct {
	Row    []byte
	Column string
	Value  []byte
}

// ScanRows returns the value of every user column (reserved columns,
// ReservedPrefix, left out) of the rows in [start, end) (end nil: every
// row below the reserved rows) in the snapshot, in row and then column
// order: one page of whole rows, ending after the row at which the
// cells it read reached limit (> 0) or their values maxBytes bytes (0: no
// bound), or at the end of the range. next is where the following page
// starts, nil once the range is done; a page may be empty and next not
// nil (its rows held deletions only).
//
// As Scan, it waits on or resolves every lock older than the snapshot in
// the rows it returns before reading past it (invariant 2), and is judged
// against the safe point once it returned (ErrSnapshotTooOld). It reads
// the snapshot alone: a transaction that buffered writes is refused with
// ErrInvalidArgument (a read-only transaction never has any).
func (t *Txn) ScanRows(ctx context.Context, start, end []byte, limit, maxBytes int) (cells []RowCell, next []byte, err error) {
	if err := t.usable(); err != nil {
		return nil, nil, err
	}
	switch {
	case len(t.writes) > 0:
		return nil, nil, fmt.Errorf("%w: ScanRows reads the snapshot alone, and the transaction buffered %d writes", ErrInvalidArgument, len(t.writes))
	case limit <= 0 || maxBytes < 0:
		return nil, nil, fmt.Errorf("%w: ScanRows limit %d, maxBytes %d", ErrInvalidArgument, limit, maxBytes)
	}
	return t.c.scanRows(ctx, t.startTS, start, end, limit, maxBytes)
}

// scanRows is one operation (Options.Operation), its lock waits included.
func (c *Client) scanRows(ctx context.Context, ts uint64, start, end []byte, limit, maxBytes int) ([]RowCell, []byte, error) {
	ctx = c.operation(ctx)
	cells, next, err := c.scanRowsPage(ctx, ts, start, end, limit, maxBytes)
	if err == nil || ctx.Err() == nil {
		// Judged only now that the page was read (safepoint.go): a
		// record found missing may be what a collection left.
		if serr := c.checkSnapshot(ctx, ts); serr != nil {
			err = serr
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return cells, next, nil
}

// rowsFilter selects, in one read of a row, what a snapshot at ts needs
// of every column: the locks older than ts and the newest write record
// below ts (the paper's prefetch).
func rowsFilter(ts uint64) storage.Filter {
	return storage.Filter{
		{Family: FamilyLock, AllQualifiers: true, Time: storage.Before(ts)},
		{Family: FamilyWrite, AllQualifiers: true, Time: storage.Before(ts), Limit: 1},
	}
}

func (c *Client) scanRowsPage(ctx context.Context, ts uint64, start, end []byte, limit, maxBytes int) ([]RowCell, []byte, error) {
	end, ok := storage.UserRange(start, end)
	if !ok {
		return nil, nil, nil
	}
	rows, more, err := c.rawRows(ctx, rowsFilter(ts), start, end, limit)
	if err != nil {
		return nil, nil, err
	}
	var cells []RowCell
	size := 0
	for i, r := range rows {
		rc, err := c.rowValues(ctx, ts, r)
		if err != nil {
			return nil, nil, err
		}
		cells = append(cells, rc...)
		for _, x := range rc {
			size += len(x.Value)
		}
		if maxBytes > 0 && size >= maxBytes && i < len(rows)-1 {
			return cells, rowAfter(r.Key), nil
		}
	}
	if more {
		return cells, rowAfter(rows[len(rows)-1].Key), nil
	}
	return cells, nil, nil
}

// rowAfter is the first row key after row.
func rowAfter(row []byte) []byte { return append(append([]byte(nil), row...), 0) }

// rawRows reads the rows of [start, end) with a user cell that f selects,
// reserved columns dropped, until they hold limit cells; more reports that
// it stopped there rather than at the end of the range. The rows are
// processed after the scan returns: a lock's resolution may wait, and a
// store's scan should not stay open meanwhile.
func (c *Client) rawRows(ctx context.Context, f storage.Filter, start, end []byte, limit int) (rows []storage.Row, more bool, err error) {
	n := 0
	err = c.store.Scan(ctx, start, end, f, 0, func(r storage.Row) bool {
		if r.Cells = userCells(r.Cells); len(r.Cells) == 0 {
			return true
		}
		rows = append(rows, r)
		if n += len(r.Cells); n >= limit {
			more = true
			return false
		}
		return true
	})
	return rows, more, err
}

// userCells drops the cells of reserved columns (the observers' acks).
func userCells(cells []storage.Cell) []storage.Cell {
	out := cells[:0]
	for _, cell := range cells {
		if !strings.HasPrefix(cell.Qualifier, ReservedPrefix) {
			out = append(out, cell)
		}
	}
	return out
}

// rowValues returns the values of r's columns in the snapshot at ts, once
// no lock older than ts is left on the row (r is the row as scanned
// through rowsFilter, its reserved columns dropped).
func (c *Client) rowValues(ctx context.Context, ts uint64, r storage.Row) ([]RowCell, error) {
	r, err := c.settledRow(ctx, ts, r)
	if err != nil {
		return nil, err
	}
	var out []RowCell
	for _, cell := range r.Cells {
		if cell.Family != FamilyWrite {
			continue // a lock the mutant skip-lock-check read past
		}
		v, err := c.committedValue(ctx, ts, storage.Row{Key: r.Key, Cells: []storage.Cell{cell}})
		if err == ErrNotFound {
			continue // deleted, or only rolled back
		}
		if err != nil {
			return nil, err
		}
		out = append(out, RowCell{Row: r.Key, Column: cell.Qualifier, Value: v})
	}
	return out, nil
}

// settledRow resolves (or waits on) each lock older than ts in r, reading
// the row again after each, until none is left: invariant 2, row by row.
// A lock written after the scan belongs to a transaction whose commit_ts
// exceeds ts, as in resolveRange.
func (c *Client) settledRow(ctx context.Context, ts uint64, r storage.Row) (storage.Row, error) {
	key, fresh := r.Key, true
	err := c.untilSettled(ctx, func() error {
		if !fresh {
			got, err := c.read(ctx, key, rowsFilter(ts))
			if err != nil {
				return err
			}
			r = storage.Row{Key: key, Cells: userCells(got.Cells)}
		}
		fresh = false
		if mutant.On(mutant.SkipLockCheck) {
			return nil // breaks invariant 2: the scan reads past every lock
		}
		for _, cell := range r.Cells {
			if cell.Family == FamilyLock {
				return resolved(c.resolveCell(ctx, key, cell.Qualifier, cell.TS, cell.Value))
			}
		}
		return nil
	})
	return r, err
}
