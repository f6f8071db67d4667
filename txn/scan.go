package txn

import (
	"bytes"
	"context"
	"sort"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// KV is one cell a scan returns.
type KV struct {
	Row   []byte
	Value []byte
}

// Scan returns the values of column in rows [start, end) (end "" = to the
// last row) in the snapshot, merged with the transaction's own buffered
// writes, in row order; limit > 0 returns at most that many. Locks older
// than the snapshot in the range are waited on or resolved first
// (invariant 2).
func (t *Txn) Scan(ctx context.Context, start, end, column string, limit int) ([]KV, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := validateCell("scan", column); err != nil {
		return nil, err
	}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	var endKey []byte
	if end != "" {
		endKey = []byte(end)
	}
	own := t.ownInRange([]byte(start), endKey, column)
	storeLimit := limit
	if len(own) > 0 {
		storeLimit = 0 // own deletes may hide stored rows
	}
	var kvs []KV
	err := t.fromStable(ctx, func() (err error) {
		kvs, err = t.c.scan(ctx, t.startTS, []byte(start), endKey, column, storeLimit)
		return err
	})
	if err != nil {
		return nil, err
	}
	kvs = mergeOwn(kvs, own)
	if limit > 0 && len(kvs) > limit {
		kvs = kvs[:limit]
	}
	return kvs, nil
}

// scan is one operation (Options.Operation), its lock waits included.
func (c *Client) scan(ctx context.Context, ts uint64, start, end []byte, col string, limit int) ([]KV, error) {
	ctx = c.operation(ctx)
	for attempt := 0; ; {
		err := c.resolveRange(ctx, ts, start, end, col)
		if err == errLocked {
			c.stats.lockWaits.Add(1)
			if err := c.backoff(ctx, attempt); err != nil {
				return nil, err
			}
			attempt++
			continue
		}
		if err != nil {
			return nil, err
		}
		kvs, err := c.scanCommitted(ctx, ts, start, end, col, limit)
		if err == nil || ctx.Err() == nil {
			// Judged only now that the scan returned (safepoint.go): a
			// record found missing may be what a collection left.
			if serr := c.checkSnapshot(ctx, ts); serr != nil {
				err = serr
			}
		}
		if err != nil {
			return nil, err
		}
		return kvs, nil
	}
}

// resolveRange resolves every lock of col (every user column when col is
// "") in [start, end) older than ts. A lock written after this pass
// belongs to a transaction whose commit_ts will exceed ts (its prewrite
// returned after ts was handed out), so it cannot hide a write the
// snapshot must see.
func (c *Client) resolveRange(ctx context.Context, ts uint64, start, end []byte, col string) error {
	if mutant.On(mutant.SkipLockCheck) {
		return nil // breaks invariant 2: the scan reads past every lock
	}
	type found struct {
		row  []byte
		cell storage.Cell
	}
	var locks []found
	f := storage.Filter{{Family: FamilyLock, Qualifier: col, AllQualifiers: col == "", Time: storage.Before(ts)}}
	err := c.store.Scan(ctx, start, end, f, 0, func(r storage.Row) bool {
		for _, cell := range userCells(r.Cells) {
			locks = append(locks, found{r.Key, cell})
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, l := range locks {
		// A lock whose transaction was pushed above ts stays, and the scan
		// reads past it: that transaction commits above ts, if at all.
		if err := c.resolveForRead(ctx, ts, l.row, l.cell.Qualifier, l.cell.TS, l.cell.Value); err != nil && err != errPushed {
			return err
		}
	}
	return nil
}

// scanCommitted reads the newest commit record below ts of each row,
// falling back to a point read where the newest record is a rollback or
// a lock-only record.
func (c *Client) scanCommitted(ctx context.Context, ts uint64, start, end []byte, col string, limit int) ([]KV, error) {
	var (
		kvs []KV
		err error
	)
	f := storage.Filter{{Family: FamilyWrite, Qualifier: col, Time: storage.Before(ts), Limit: 1}}
	serr := c.store.Scan(ctx, start, end, f, 0, func(r storage.Row) bool {
		var v []byte
		if v, err = c.committedValue(ctx, ts, r); err == nil {
			kvs = append(kvs, KV{Row: r.Key, Value: v})
		} else if err == ErrNotFound {
			err = nil
		}
		return err == nil && (limit <= 0 || len(kvs) < limit)
	})
	if serr != nil {
		return nil, serr
	}
	return kvs, err
}

// committedValue is the value of r's one cell, the newest write record
// below ts of its column (read with Limit 1): the record's, or when it is
// a rollback or lock-only record, that of the newest put or delete below
// it, read a page at a time as a point read does (get.go).
func (c *Client) committedValue(ctx context.Context, ts uint64, r storage.Row) ([]byte, error) {
	col := r.Cells[0].Qualifier
	w, _, found, err := c.newestCommit(ctx, r.Key, col, ts, r.Cells[:1])
	if err != nil || !found {
		return nil, orNotFound(err)
	}
	return c.value(ctx, r.Key, col, &w)
}

// ownInRange returns t's buffered puts and deletes of col in [start,
// end) (end nil: unbounded), in row order.
func (t *Txn) ownInRange(start, end []byte, col string) []mutation {
	var own []mutation
	for _, m := range t.writes {
		if m.op == OpLock {
			continue // a lock-only mark hides no stored value
		}
		if m.col == col && bytes.Compare(m.row, start) >= 0 && (end == nil || bytes.Compare(m.row, end) < 0) {
			own = append(own, m)
		}
	}
	sort.Slice(own, func(i, j int) bool { return bytes.Compare(own[i].row, own[j].row) < 0 })
	return own
}

// mergeOwn overlays the transaction's own writes (sorted) on kvs (sorted).
func mergeOwn(kvs []KV, own []mutation) []KV {
	if len(own) == 0 {
		return kvs
	}
	out := make([]KV, 0, len(kvs)+len(own))
	i := 0
	for _, m := range own {
		for i < len(kvs) && bytes.Compare(kvs[i].Row, m.row) < 0 {
			out = append(out, kvs[i])
			i++
		}
		if i < len(kvs) && bytes.Equal(kvs[i].Row, m.row) {
			i++
		}
		if m.op == OpPut {
			out = append(out, KV{Row: m.row, Value: append([]byte(nil), m.value...)})
		}
	}
	return append(out, kvs[i:]...)
}

func sortRows(rows [][]byte) {
	sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i], rows[j]) < 0 })
}
