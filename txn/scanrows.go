package txn

import (
	"context"
	"fmt"
	"strings"

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
	if err := t.start(ctx); err != nil {
		return nil, nil, err
	}
	err = t.fromStable(ctx, func() (err error) {
		cells, next, err = t.c.scanRows(ctx, t.startTS, start, end, limit, maxBytes)
		return err
	})
	return cells, next, err
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

// scanRowsPage reads one page in three steps, as Scan does for one column:
// the page's rows [start, stop) are found (whole rows holding limit write
// records), then every lock older than ts among them is resolved, and
// only then are their write records read (invariant 2).
//
// The locks are scanned apart, over the page's rows alone, and before the
// data. A single scan of locks and write records together was tried: on
// an LSM store each of its chunks steps again over every deleted lock to
// the end of the range (a committed lock leaves a tombstone until a
// compaction), which made a backup quadratic in the rows just written.
// Reading the write records first and the locks after would miss a
// commit made between the two, hence the second read of the records.
func (c *Client) scanRowsPage(ctx context.Context, ts uint64, start, end []byte, limit, maxBytes int) ([]RowCell, []byte, error) {
	end, ok := storage.UserRange(start, end)
	if !ok {
		return nil, nil, nil
	}
	writes := storage.Filter{{Family: FamilyWrite, AllQualifiers: true, Time: storage.Before(ts), Limit: 1}}
	stop, more, err := c.pageEnd(ctx, writes, start, end, limit)
	if err != nil {
		return nil, nil, err
	}
	if err := c.resolveRows(ctx, ts, start, stop); err != nil {
		return nil, nil, err
	}
	rows, _, err := c.rawRows(ctx, writes, start, stop, 0)
	if err != nil {
		return nil, nil, err
	}
	cells, last, err := c.pageValues(ctx, ts, rows, maxBytes)
	switch {
	case err != nil:
		return nil, nil, err
	case last < len(rows)-1:
		return cells, rowAfter(rows[last].Key), nil
	case more:
		return cells, stop, nil
	}
	return cells, nil, nil
}

// pageEnd returns where the page from start ends: after the row at which
// the write records f selects reach limit (more: rows may follow), or end.
func (c *Client) pageEnd(ctx context.Context, f storage.Filter, start, end []byte, limit int) (stop []byte, more bool, err error) {
	rows, more, err := c.rawRows(ctx, f, start, end, limit)
	if err != nil || !more {
		return end, false, err
	}
	return rowAfter(rows[len(rows)-1].Key), true, nil
}

// resolveRows resolves every lock older than ts of a user column in
// [start, end), waiting on live ones: resolveRange for every column.
func (c *Client) resolveRows(ctx context.Context, ts uint64, start, end []byte) error {
	for attempt := 0; ; attempt++ {
		err := c.resolveRange(ctx, ts, start, end, "")
		if err != errLocked {
			return err
		}
		c.stats.lockWaits.Add(1)
		if err := c.backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// pageValues returns the values rows' write records point at, up to the
// row at which they reach maxBytes (0: no bound), and that row's index.
func (c *Client) pageValues(ctx context.Context, ts uint64, rows []storage.Row, maxBytes int) ([]RowCell, int, error) {
	var cells []RowCell
	size := 0
	for i, r := range rows {
		for _, cell := range r.Cells {
			v, err := c.committedValue(ctx, ts, storage.Row{Key: r.Key, Cells: []storage.Cell{cell}})
			if err == ErrNotFound {
				continue // deleted, or only rolled back
			}
			if err != nil {
				return nil, 0, err
			}
			cells = append(cells, RowCell{Row: r.Key, Column: cell.Qualifier, Value: v})
			size += len(v)
		}
		if maxBytes > 0 && size >= maxBytes {
			return cells, i, nil
		}
	}
	return cells, len(rows) - 1, nil
}

// rowAfter is the first row key after row.
func rowAfter(row []byte) []byte { return append(append([]byte(nil), row...), 0) }

// rawRows reads the rows of [start, end) with a user cell that f selects,
// reserved columns dropped, until they hold limit cells (0: all); more
// reports that it stopped there rather than at the end of the range.
func (c *Client) rawRows(ctx context.Context, f storage.Filter, start, end []byte, limit int) (rows []storage.Row, more bool, err error) {
	n := 0
	err = c.store.Scan(ctx, start, end, f, 0, func(r storage.Row) bool {
		if r.Cells = userCells(r.Cells); len(r.Cells) == 0 {
			return true
		}
		rows = append(rows, r)
		if n += len(r.Cells); limit > 0 && n >= limit {
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
