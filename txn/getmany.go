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
	if len(read) == 0 {
		return values, nil
	}
	if t.startTS == 0 {
		if done, err := c.getFresh(ctx, t, cells, read, values); done || err != nil {
			return values, err
		}
	}
	multi, ok := c.store.(storage.MultiReader)
	if !ok || c.index != nil || len(read) < 2 {
		// The index answers a lock check and a known commit from memory:
		// one read per cell is what it costs there.
		for _, i := range read {
			v, err := t.getAt(ctx, []byte(cells[i].Row), cells[i].Column)
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

// getFresh reads cells[read] for t, which has no start timestamp yet
// (BeginDeferred), in one ReadRowsFresh that brings the timestamp too,
// and settles them as getMany does (doc.go, "Durability over RPC").
// done is false, nothing read, where the store takes no timestamp (an
// older server, never asked again) or there is no such store: t then
// has a start timestamp of the oracle's, unless err says why not.
func (c *Client) getFresh(ctx context.Context, t *Txn, cells []CellKey, read []int, values [][]byte) (done bool, err error) {
	if c.fresh == nil || c.noFresh.Load() {
		return false, t.start(ctx)
	}
	ctx = c.operation(ctx)
	// Unbounded: the store cuts them below the timestamp it takes.
	reads := manyReads(cells, read, 0)
	var (
		ts   uint64
		rows []storage.Row
	)
	for range c.opts.StoreRetries + 1 {
		// Safe to send again: a read, each copy at a timestamp of its own.
		if ts, rows, err = c.fresh.ReadRowsFresh(ctx, reads); err == nil || !retryable(err) {
			break
		}
	}
	switch {
	case errors.Is(err, storage.ErrNoOnePhase):
		c.noFresh.Store(true)
		return false, t.start(ctx)
	case err != nil:
		return true, err
	}
	t.begun(ts)
	return true, c.settleMany(ctx, ts, reads, rows, cells, read, values)
}

// manyReads are the reads of cells[read] at snapshot ts (0: unbounded).
func manyReads(cells []CellKey, read []int, ts uint64) []storage.RowRead {
	reads := make([]storage.RowRead, len(read))
	for j, i := range read {
		reads[j] = storage.RowRead{Row: []byte(cells[i].Row), Filter: visibleFilter(cells[i].Column, ts)}
	}
	return reads
}

// getMany reads cells[read] in one ReadRows, each through visibleFilter,
// and settles each as get does: a cell whose read meets a lock, or needs
// more than the one call (older write records, a value in the data
// column), goes on alone. The safe point is checked once, after every
// read returned (get).
func (c *Client) getMany(ctx context.Context, multi storage.MultiReader, ts uint64, cells []CellKey, read []int, values [][]byte) error {
	ctx = c.operation(ctx)
	reads := manyReads(cells, read, ts)
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
	return c.settleMany(ctx, ts, reads, rows, cells, read, values)
}

// settleMany settles the rows of reads, read at snapshot ts, into
// values, as getMany says.
func (c *Client) settleMany(ctx context.Context, ts uint64, reads []storage.RowRead, rows []storage.Row, cells []CellKey, read []int, values [][]byte) error {
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
