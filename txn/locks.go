package txn

import (
	"context"
	"errors"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// LockInfo describes one lock found in the store.
type LockInfo struct {
	Row     []byte
	Column  string
	StartTS uint64
	// Lock is the lock record; its WallMS is the newest of the record's
	// own and its heartbeats' (FamilyBeat).
	Lock Lock
	// Expires is when the lock's TTL runs out without a further heartbeat.
	Expires time.Time
}

// Locks lists every lock in the store, in row order (the lock family is
// its own keyspace, so this reads no data), with the wall time of its
// newest heartbeat.
func (c *Client) Locks(ctx context.Context) ([]LockInfo, error) {
	ctx = c.operation(ctx)
	locks, err := c.lockRecords(ctx)
	if err != nil || len(locks) == 0 {
		return locks, err
	}
	beats := map[[2]string]uint64{} // (row, qualifier) → newest beat
	err = c.store.Scan(ctx, nil, nil, storage.Filter{{Family: FamilyBeat, AllQualifiers: true, Limit: 1}}, 0, func(r storage.Row) bool {
		for _, cell := range r.Cells {
			beats[[2]string{string(r.Key), cell.Qualifier}] = cell.TS
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	for i := range locks {
		l := &locks[i]
		if b, ok := beats[[2]string{string(l.Row), beatQualifier(l.Column, l.StartTS)}]; ok && b > l.Lock.WallMS {
			l.Lock.WallMS = b
			l.Expires = time.UnixMilli(int64(b + l.Lock.TTLMS))
		}
	}
	return locks, nil
}

// lockRecords lists every lock record, with the wall time it holds.
func (c *Client) lockRecords(ctx context.Context) ([]LockInfo, error) {
	var (
		out  []LockInfo
		derr error
	)
	f := storage.Filter{{Family: FamilyLock, AllQualifiers: true}}
	err := c.store.Scan(ctx, nil, nil, f, 0, func(r storage.Row) bool {
		for _, cell := range r.Cells {
			l, err := decodeLock(cell.Value)
			if err != nil {
				derr = err
				return false
			}
			exp := time.UnixMilli(int64(l.WallMS + l.TTLMS))
			out = append(out, LockInfo{Row: r.Key, Column: cell.Qualifier, StartTS: cell.TS, Lock: l, Expires: exp})
		}
		return true
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// ResolveLocks settles every lock whose transaction is committed, rolled
// back, or owned by a dead or expired owner, and leaves the locks of live
// transactions. It returns how many locks it settled. progress, if not
// nil, is called with (0, total) once the locks are listed and with
// (done, total) after each is looked at.
func (c *Client) ResolveLocks(ctx context.Context, progress func(done, total int)) (int, error) {
	ctx = c.operation(ctx)
	locks, err := c.Locks(ctx)
	if err != nil {
		return 0, err
	}
	if progress == nil {
		progress = func(int, int) {}
	}
	progress(0, len(locks))
	n := 0
	for i, l := range locks {
		err := c.resolveCell(ctx, l.Row, l.Column, l.StartTS, encodeLock(&l.Lock))
		switch {
		case err == nil:
			n++
		case !errors.Is(err, errLocked):
			return n, err
		}
		progress(i+1, len(locks))
	}
	return n, nil
}

// RawRow returns the protocol cells (data, lock, write) of every column of
// row, for inspection (percolator dump).
func (c *Client) RawRow(ctx context.Context, row []byte) ([]storage.Cell, error) {
	r, err := c.store.ReadRow(ctx, row, storage.Filter{
		{Family: FamilyData, AllQualifiers: true},
		{Family: FamilyLock, AllQualifiers: true},
		{Family: FamilyWrite, AllQualifiers: true},
	})
	return r.Cells, err
}

// Rows lists up to limit row keys that have any write record or lock, in
// order, starting at start.
func (c *Client) Rows(ctx context.Context, start []byte, limit int) ([][]byte, error) {
	var rows [][]byte
	seen := map[string]bool{}
	for _, fam := range []string{FamilyWrite, FamilyLock} {
		err := c.store.Scan(ctx, start, nil, storage.Filter{{Family: fam, AllQualifiers: true, Limit: 1}}, limit,
			func(r storage.Row) bool {
				if !seen[string(r.Key)] {
					seen[string(r.Key)] = true
					rows = append(rows, r.Key)
				}
				return true
			})
		if err != nil {
			return nil, err
		}
	}
	sortRows(rows)
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, nil
}

// ColumnRows lists, from row from on (nil: the first), up to limit (0:
// all) rows that hold a commit record or a lock of column, in row order:
// the cells an observer registered on column must notify (its backfill).
func (c *Client) ColumnRows(ctx context.Context, column string, from []byte, limit int) ([][]byte, error) {
	filter := storage.Filter{{Family: FamilyWrite, Qualifier: column, Limit: 1}, {Family: FamilyLock, Qualifier: column, Limit: 1}}
	var rows [][]byte
	err := c.store.Scan(ctx, from, nil, filter, limit, func(r storage.Row) bool {
		rows = append(rows, r.Key)
		return true
	})
	return rows, err
}
