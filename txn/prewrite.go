package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// rowWrites is the part of a transaction's writes that falls in one row;
// one prewrite and one commit call each.
type rowWrites struct {
	row  []byte
	muts []*mutation
}

// groupByRow splits the writes into rows, the primary's row first.
func groupByRow(writes []mutation) []*rowWrites {
	if len(writes) == 1 { // one allocation for the commonest transaction
		one := &struct {
			rw   rowWrites
			mut  [1]*mutation
			rows [1]*rowWrites
		}{}
		one.mut[0] = &writes[0]
		one.rw = rowWrites{row: writes[0].row, muts: one.mut[:]}
		one.rows[0] = &one.rw
		return one.rows[:]
	}
	var rows []*rowWrites
	at := make(map[string]*rowWrites)
	for i := range writes {
		m := &writes[i]
		rw := at[string(m.row)]
		if rw == nil {
			rw = &rowWrites{row: m.row}
			at[string(m.row)] = rw
			rows = append(rows, rw)
		}
		rw.muts = append(rw.muts, m)
	}
	return rows
}

// prewriteRetries bounds how often a prewrite blocked only by locks that
// it resolved is tried again before the transaction gives up.
const prewriteRetries = 2

// prewrite locks every cell of rw at the transaction's start_ts and writes
// its data, in one CheckAndMutate: it applies only if no cell has a lock
// at another timestamp nor a write record at or after start_ts. A retried
// or duplicated prewrite finds its own lock, which the predicate does not
// count, and rewrites the same cells (invariant 6); a prewrite delivered
// after a rollback finds the rollback record and applies nothing
// (invariant 5).
func (c *Client) prewrite(ctx context.Context, t *Txn, rw *rowWrites, primary *mutation, obs Observed) error {
	pred, writes, ifFalse := c.prewriteCall(t, rw, primary, obs)
	cond := c.prewriteCond(rw, t.startTS)
	for try := 0; ; try++ {
		// Safe in any order: a copy before the commit point finds only its
		// own lock and rewrites the same cells (the lock's wall time moves
		// back to the prewrite's, which heartbeats do not rely on: they are
		// versions of their own); a copy after a commit or rollback finds
		// a write record at or after start_ts and applies nothing.
		matched, err := c.casIndexed(ctx, rw.row, cond, writes, pred, nil, ifFalse, true)
		if err != nil || !matched {
			return err
		}
		resolved, err := c.prewriteConflict(ctx, t.startTS, rw, pred)
		if !resolved || try == prewriteRetries {
			return err
		}
	}
}

// prewriteCond decides a prewrite's predicate (and a one-phase commit's)
// from the owner's index under the row latch where it can: the index
// knows every lock, and every write record above its floor, so a
// prewrite of a fresh transaction usually reads nothing.
func (c *Client) prewriteCond(rw *rowWrites, startTS uint64) storage.Cond {
	return func() (bool, bool) { return c.index.conflicts(rw, startTS, startTS) }
}

// prewriteCall returns the prewrite's predicate, its write-record half
// (the part the lock index cannot answer) and its mutations, with a
// notification for each put or delete of a column obs observes. A
// lock-only mark (OpLock) is locked and checked as any write, and writes
// no data.
func (c *Client) prewriteCall(t *Txn, rw *rowWrites, primary *mutation, obs Observed) (pred, writes storage.Filter, muts []storage.Mutation) {
	pred, writes = prewritePredicate(t, rw), prewriteWrites(t, rw)
	muts, _ = c.prewriteMutations(t, rw, primary, obs, nil)
	return pred, writes, muts
}

// prewritePredicate is a prewrite's predicate: a lock of another
// transaction, a write record at or after start_ts, or the row's GC
// fence at or above it, in any cell of rw (its write-record half alone:
// prewriteWrites).
func prewritePredicate(t *Txn, rw *rowWrites) storage.Filter {
	pred := make(storage.Filter, 0, 3*len(rw.muts)+1)
	for _, m := range rw.muts {
		pred = append(pred,
			storage.Selector{Family: FamilyLock, Qualifier: m.col, Time: storage.Before(t.startTS)},
			storage.Selector{Family: FamilyLock, Qualifier: m.col, Time: storage.From(t.startTS + 1)},
			writeSince(m.col, t.startTS))
	}
	return append(pred, fenceSince(t.startTS))
}

// prewriteWrites is the write-record half of a prewrite's predicate: a
// write record at or after start_ts in any cell of rw, or the row's GC
// fence at or above it (the part the lock index cannot answer).
func prewriteWrites(t *Txn, rw *rowWrites) storage.Filter {
	writes := make(storage.Filter, 0, len(rw.muts)+1)
	for _, m := range rw.muts {
		writes = append(writes, writeSince(m.col, t.startTS))
	}
	// The row's GC fence at or above start_ts: collected history below
	// it that this prewrite must not land on (doc.go, "Garbage
	// collection").
	return append(writes, fenceSince(t.startTS))
}

// writeSince selects col's write records at or after ts.
func writeSince(col string, ts uint64) storage.Selector {
	return storage.Selector{Family: FamilyWrite, Qualifier: col, Time: storage.From(ts)}
}

// prewriteMutations returns what a prewrite of rw writes: each cell's
// lock, its data where the value is not inline, and a notification of
// each put or delete of a column obs observes. With async set, the locks
// are an async-commit transaction's (doc.go, "Async commit"), returned in
// stamped for the store to stamp, the primary's naming async's cells.
func (c *Client) prewriteMutations(t *Txn, rw *rowWrites, primary *mutation, obs Observed, async []Cell) (muts, stamped []storage.Mutation) {
	muts = make([]storage.Mutation, 0, 2*len(rw.muts))
	ttl := t.lockTTL()
	for _, m := range rw.muts {
		l := c.lockFor(m, primary, ttl)
		lock := storage.SetCell(FamilyLock, m.col, t.startTS, nil)
		if async != nil {
			l.Async = true
			if m == primary {
				l.Secondaries = async
			}
		}
		lock.Value = encodeLock(&l)
		if async != nil {
			stamped = append(stamped, lock)
		} else {
			muts = append(muts, lock)
		}
		if m.op == OpPut && !l.Inline {
			muts = append(muts, storage.SetCell(FamilyData, m.col, t.startTS, m.value))
		}
		if n, ok := c.notifyMutation(obs, m, t.startTS); ok && !c.notify.apart {
			muts = append(muts, n)
		}
	}
	return muts, stamped
}

// lockFor builds the lock record of m, stamped with the current wall time
// and valid for ttl.
func (c *Client) lockFor(m, primary *mutation, ttl time.Duration) Lock {
	l := Lock{
		Op: m.op, PrimaryRow: primary.row, PrimaryCol: primary.col, Owner: c.opts.Owner,
		WallMS: c.nowMS(), TTLMS: uint64(ttl.Milliseconds()),
	}
	if m.op == OpPut && c.inline(m.value) {
		l.Inline, l.Value = true, m.value
	}
	return l
}

// prewriteConflict reads what blocked a prewrite. It returns a
// *ConflictError, after trying to resolve blocking locks; resolved reports
// that every blocker was a lock now gone, so the prewrite may be retried.
func (c *Client) prewriteConflict(ctx context.Context, startTS uint64, rw *rowWrites, pred storage.Filter) (resolved bool, err error) {
	r, err := c.read(ctx, rw.row, pred)
	if err != nil {
		return false, err
	}
	resolved = true
	var conflict *ConflictError
	for i := range r.Cells {
		cell := &r.Cells[i]
		reason, gone := c.blocker(ctx, rw.row, cell, startTS)
		resolved = resolved && gone
		if conflict == nil {
			conflict = &ConflictError{Row: rw.row, Column: cell.Qualifier, StartTS: startTS, Reason: reason}
		}
	}
	if conflict == nil { // the blocker vanished between the two calls
		return true, &ConflictError{Row: rw.row, StartTS: startTS, Reason: "transient"}
	}
	if resolved {
		c.stats.prewriteResolve.Add(1)
	}
	return resolved, conflict
}

// blocker describes one cell that blocked a prewrite, resolving it if it
// is a lock; gone reports that the lock was resolved.
func (c *Client) blocker(ctx context.Context, row []byte, cell *storage.Cell, startTS uint64) (reason string, gone bool) {
	if cell.Family == FamilyLock {
		err := c.resolveCell(ctx, row, cell.Qualifier, cell.TS, cell.Value)
		return fmt.Sprintf("locked by the transaction at start_ts %d", cell.TS), err == nil
	}
	w, err := DecodeWrite(cell.Value)
	switch {
	case err != nil:
		return err.Error(), false
	case w.Op == OpRollback && cell.TS == startTS:
		return "this transaction was rolled back by another client", false
	case w.Op == OpRollback:
		return fmt.Sprintf("rolled-back transaction at %d after start", cell.TS), false
	case w.Op == OpLock:
		return fmt.Sprintf("newer read for update committed at %d", cell.TS), false
	}
	return fmt.Sprintf("newer write committed at %d", cell.TS), false
}

// inline reports whether v travels inside the lock and commit records.
func (c *Client) inline(v []byte) bool { return len(v) <= c.opts.InlineSize }
