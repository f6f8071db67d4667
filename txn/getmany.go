package txn

import (
	"context"
	"errors"

	"github.com/seed-992972ee/percolator/storage"
)

// CellKey names one cell: a column of a row.
type CellKey struct {
	Row, Column string
}

// GetMany returns the values of cells in the snapshot at StartTS, or the
// transaction's own buffered writes: values[i] is cells[i]'s, nil where
// the cell has none (Get's ErrNotFound), non-nil (perhaps empty) where it
// has one. Over a store that reads many rows in one call
// (storage.MultiReader: a server) the cells are read in one round trip;
// a cell found locked is then read again alone, waiting on or resolving
// its lock as Get does. Elsewhere it is Get, cell after cell.
func (t *Txn) GetMany(ctx context.Context, cells []CellKey) ([][]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	for _, k := range cells {
		if err := validateCell(k.Row, k.Column); err != nil {
			return nil, err
		}
	}
	values := make([][]byte, len(cells))
	var read []int // the cells the store must answer
	for i, k := range cells {
		if m := t.own(k.Row, k.Column); m != nil {
			if m.op == OpPut {
				values[i] = append([]byte{}, m.value...)
			}
			continue
		}
		read = append(read, i)
	}
	c := t.c
	multi, ok := c.store.(storage.MultiReader)
	if !ok || c.index != nil || len(read) < 2 {
		// The index answers a lock check and a known commit from memory:
		// one read per cell is what it costs there.
		for _, i := range read {
			v, err := c.get(ctx, t.startTS, []byte(cells[i].Row), cells[i].Column)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err
			}
			if err == nil {
				values[i] = nonNil(v)
			}
		}
		return values, nil
	}
	if err := c.getMany(ctx, multi, t.startTS, cells, read, values); err != nil {
		return nil, err
	}
	return values, nil
}

// getMany reads cells[read] in one ReadRows, each through visibleFilter,
// and settles each as get does: a cell whose read meets a lock, or needs
// more than the one call (older write records, a value in the data
// column), goes on alone. The safe point is checked once, after every
// read returned (get).
func (c *Client) getMany(ctx context.Context, multi storage.MultiReader, ts uint64, cells []CellKey, read []int, values [][]byte) error {
	ctx = c.operation(ctx)
	reads := make([]storage.RowRead, len(read))
	for j, i := range read {
		reads[j] = storage.RowRead{Row: []byte(cells[i].Row), Filter: visibleFilter(cells[i].Column, ts)}
	}
	var (
		rows []storage.Row
		err  error
	)
	for range c.opts.StoreRetries + 1 {
		if rows, err = multi.ReadRows(ctx, reads); err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		return err
	}
	for j, i := range read {
		row, col := reads[j].Row, cells[i].Column
		first := true
		err := c.untilSettled(ctx, func() error {
			var (
				w     Write
				found bool
				err   error
			)
			if first {
				first = false
				w, _, found, err = c.visibleIn(ctx, ts, row, col, rows[j].Cells)
			} else {
				w, _, found, err = c.visibleCommit(ctx, ts, row, col)
			}
			if err != nil || !found {
				return orNotFound(err)
			}
			v, err := c.value(ctx, row, col, &w)
			if err == nil {
				values[i] = nonNil(v)
			}
			return err
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return c.checkSnapshot(ctx, ts)
}

// nonNil returns v, or an empty slice for nil: GetMany's nil means absent.
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}
