package percolator

import (
	"context"

	"github.com/seed-992972ee/percolator/txn"
)

// Txn is one snapshot-isolation transaction: it reads the snapshot at its
// start timestamp (every transaction committed before it began, nothing
// after) plus its own buffered writes, and its writes become visible
// together at Commit or not at all. Reads wait on, or resolve, the locks of
// transactions still committing. Not safe for concurrent use: one goroutine
// drives it from Begin to Commit or Rollback.
//
// Rows are byte strings (up to 4 KiB, not empty); columns are names (up to
// 256 bytes, not empty, without ':' or NUL, not starting with "__"); values
// are bytes (up to Options.MaxValueSize). Bad input returns an error
// matching ErrInvalidArgument and buffers nothing.
type Txn struct{ t *txn.Txn }

// KV is one cell Scan returns.
type KV struct {
	Row   []byte
	Value []byte
}

// StartTS returns the snapshot timestamp: unique to a read-write
// transaction, possibly shared by read-only ones (DB.BeginReadOnly). It
// is StartTSContext without a context: 0 where that returns an error.
func (tx *Txn) StartTS() uint64 { return tx.t.StartTS() }

// StartTSContext returns the snapshot timestamp every read of tx reads
// at, taking it now if tx has none yet (a transaction over a server takes
// it with its first read), the oracle's call bounded by ctx. A read-only
// transaction's snapshot is fixed by this call: one its first read could
// still have moved is replaced by a fresh timestamp first, so what it
// returns is what every read uses (a backup records it before it reads).
// If the oracle fails, the error is returned and nothing is fixed.
func (tx *Txn) StartTSContext(ctx context.Context) (uint64, error) {
	ts, err := tx.t.StartTSContext(ctx)
	return ts, apiErr(err)
}

// ReadOnly reports whether the transaction was begun read-only.
func (tx *Txn) ReadOnly() bool { return tx.t.ReadOnly() }

// Get returns the value of (row, column) in the snapshot, or the
// transaction's own buffered write; ErrNotFound when the cell has none.
func (tx *Txn) Get(ctx context.Context, row, column string) ([]byte, error) {
	v, err := tx.t.Get(ctx, row, column)
	return v, apiErr(err)
}

// CellKey names one cell: a column of a row (GetMany).
type CellKey = txn.CellKey

// GetMany returns the values of several cells in the snapshot, or the
// transaction's own buffered writes: values[i] is cells[i]'s, nil where
// the cell has none (where Get returns ErrNotFound) and non-nil, perhaps
// empty, where it has one. Over a server the cells are read in one round
// trip where Get would take one each (a cell found locked is then read
// again on its own, waiting on or resolving the lock as Get does);
// embedded, the reads are served from memory as Get's are. Bad input
// returns ErrInvalidArgument and reads nothing.
func (tx *Txn) GetMany(ctx context.Context, cells []CellKey) ([][]byte, error) {
	v, err := tx.t.GetMany(ctx, cells)
	return v, apiErr(err)
}

// GetForUpdate is Get, and also locks the cell at Commit as if it were
// written, without changing it: a concurrent transaction that writes the
// cell, or reads it with GetForUpdate, conflicts with this one (at most
// one commits; ErrConflict). Reading with GetForUpdate the cells whose
// values decide a write rules out write skew, which snapshot isolation
// allows: two transactions that each read what the other writes. A Set or
// Delete of the cell takes its place; it counts towards the transaction's
// limits as a write. ErrReadOnly in a read-only transaction.
func (tx *Txn) GetForUpdate(ctx context.Context, row, column string) ([]byte, error) {
	v, err := tx.t.GetForUpdate(ctx, row, column)
	return v, apiErr(err)
}

// Set buffers a write of value to (row, column); the value is copied. It
// becomes visible at Commit.
func (tx *Txn) Set(row, column string, value []byte) error {
	return apiErr(tx.t.Set(row, column, value))
}

// Delete buffers a deletion of (row, column).
func (tx *Txn) Delete(row, column string) error { return apiErr(tx.t.Delete(row, column)) }

// Scan returns the values of column in rows [start, end) (end "" = to the
// last row) in the snapshot, merged with the transaction's own buffered
// writes, in row order; limit > 0 returns at most that many.
func (tx *Txn) Scan(ctx context.Context, start, end, column string, limit int) ([]KV, error) {
	kvs, err := tx.t.Scan(ctx, start, end, column, limit)
	if err != nil {
		return nil, apiErr(err)
	}
	out := make([]KV, len(kvs))
	for i, kv := range kvs {
		out[i] = KV{Row: kv.Row, Value: kv.Value}
	}
	return out, nil
}

// Cell is one cell ScanRows returns: a column's value in a row.
type Cell struct {
	Row    []byte
	Column string
	Value  []byte
}

// ScanRows returns every column's value of the rows in [start, end) (end
// "" = to the last row) in the snapshot, in row and then column order, a
// page at a time: whole rows, up to the row at which the page holds limit
// cells (limit > 0) or maxBytes bytes of values (0: no bound). next is
// where the following page starts, "" once the range is done; a page may
// be empty while next is not (its rows held deletions only). It reads the
// snapshot alone: in a transaction holding buffered writes it fails with
// ErrInvalidArgument. A scan of a whole store is a loop over pages in one
// read-only transaction (package backup's).
func (tx *Txn) ScanRows(ctx context.Context, start, end string, limit, maxBytes int) (cells []Cell, next string, err error) {
	var endKey []byte
	if end != "" {
		endKey = []byte(end)
	}
	rc, nk, err := tx.t.ScanRows(ctx, []byte(start), endKey, limit, maxBytes)
	if err != nil {
		return nil, "", apiErr(err)
	}
	cells = make([]Cell, len(rc))
	for i, c := range rc {
		cells[i] = Cell(c)
	}
	return cells, string(nk), nil
}

// ValidateCell checks a row and a column as Set does: ErrInvalidArgument
// for an empty or oversized row, a reserved row, or a malformed or
// reserved column.
func ValidateCell(row, column string) error {
	return apiErr(txn.ValidateCell(row, column))
}

// Commit makes the buffered writes visible atomically and durably, or
// returns an error and makes none visible (ErrConflict on a write-write
// conflict), or returns ErrCommitUnknown when the outcome could not be
// learned. A second Commit or Rollback returns ErrTxnFinished.
func (tx *Txn) Commit(ctx context.Context) error { return apiErr(tx.t.Commit(ctx)) }

// Rollback abandons the transaction: nothing is written before Commit, so
// there is nothing to undo.
func (tx *Txn) Rollback(ctx context.Context) error { return apiErr(tx.t.Rollback(ctx)) }
