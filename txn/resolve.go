package txn

import (
	"context"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// Lock resolution: what a client does with a lock of another transaction
// that it found in its way (the paper's BackoffAndMaybeCleanupLock). The
// primary lock is the transaction's single commit point (invariant 4):
//
//	primary committed          → roll the lock forward (anyone, any time)
//	primary rolled back        → roll the lock back
//	primary locked, alive      → wait (errLocked); or, for a read
//	                              through locks, push the primary past
//	                              the snapshot and read past (errPushed)
//	primary locked, dead/expired → roll the primary back first (a
//	                              CheckAndMutate on its lock), then this lock
//	primary never locked       → if the found lock's owner is alive, wait;
//	                              else leave a rollback record at the primary
//	                              so the primary can never be locked, then
//	                              roll this lock back
//
// An async-commit lock has no single commit point: its transaction is
// decided from all its rows (resolveAsync, async.go).

// statusKind is the state of a transaction as read at its primary.
type statusKind uint8

const (
	stLocked     statusKind = iota + 1 // primary lock present
	stCommitted                        // commit record present
	stRolledBack                       // rollback record, or it can never commit
	stAbsent                           // nothing of it at the primary
)

type txnStatus struct {
	kind     statusKind
	lock     Lock   // stLocked
	commitTS uint64 // stCommitted
}

// maxResolveSteps bounds one resolution; past it the caller backs off.
const maxResolveSteps = 8

// resolveCell settles the lock at (row, col, lockTS) whose encoded content
// is raw. It returns nil once the lock is gone, errLocked when its
// transaction is alive, or a storage error. It never waits.
func (c *Client) resolveCell(ctx context.Context, row []byte, col string, lockTS uint64, raw []byte) error {
	return c.resolveLock(ctx, row, col, lockTS, raw, 0)
}

// resolveForRead is resolveCell for a read at snapshot readTS: where the
// lock's transaction is alive and the client reads through locks
// (pushing), it pushes the transaction above readTS and returns errPushed
// (read past the lock) instead of errLocked. Writers never push (doc.go,
// "Reads through locks").
func (c *Client) resolveForRead(ctx context.Context, readTS uint64, row []byte, col string, lockTS uint64, raw []byte) error {
	return c.resolveLock(ctx, row, col, lockTS, raw, readTS)
}

// resolveLock is resolveCell for a read at readTS (0: a writer's). An
// async-commit lock is never pushed: resolveAsync decides it from its
// rows. Another lock's live transaction is pushed above readTS when this
// client reads through locks.
func (c *Client) resolveLock(ctx context.Context, row []byte, col string, lockTS uint64, raw []byte, readTS uint64) error {
	lock, err := decodeLock(raw)
	if err != nil {
		return err
	}
	// Its writes settle a lock already written, and free it: they may use
	// a nearly full store's reserve (doc.go, "A nearly full disk").
	ctx = storage.WithReserve(ctx)
	if lock.Async {
		return c.resolveAsync(ctx, row, col, lockTS, &lock, readTS)
	}
	pushTS := readTS
	if !c.pushing() {
		pushTS = 0
	}
	if pushTS > lockTS && c.alive(ctx, &lock) {
		// Push first, without reading the primary's status: a push that
		// applies finds the primary's lock standing, which is all the
		// read past it needs (doc.go, "Reads through locks", 1 and 2),
		// and the lock met, alive, says the primary's (written with it,
		// only ever extended by beats) is alive too. A read that meets
		// a live lock makes one call more, not two. Not applied: the
		// primary's lock is gone, and its status decides below.
		if err := c.pushLock(ctx, row, col, lockTS, pushTS, &lock); err != nil {
			return err
		}
	}
	for range maxResolveSteps {
		st, err := c.status(ctx, lock.PrimaryRow, lock.PrimaryCol, lockTS)
		if err != nil {
			return err
		}
		switch st.kind {
		case stCommitted:
			if pushTS != 0 && st.commitTS > pushTS {
				// Committed above the reader's snapshot: its record is
				// not read there, so the reader reads past the lock and
				// leaves it to be rolled forward by others.
				return errPushed
			}
			return c.rollForward(ctx, row, col, lockTS, st.commitTS, &lock)
		case stRolledBack:
			return c.rollBack(ctx, row, col, lockTS)
		case stLocked:
			if c.alive(ctx, &st.lock) {
				if pushTS <= lockTS {
					return errLocked
				}
				// Pushed: read past. Not applied: the primary's lock is
				// gone since the status was read; read it again.
				if err := c.pushLock(ctx, row, col, lockTS, pushTS, &lock); err != nil {
					return err
				}
				continue
			}
			if err := c.rollBackPrimary(ctx, lock.PrimaryRow, lock.PrimaryCol, lockTS); err != nil {
				return err
			}
		case stAbsent:
			if c.alive(ctx, &lock) {
				return errLocked
			}
			if mutant.On(mutant.SkipRollback) {
				// Breaks invariant 5: no fence at the primary either.
				return c.rollBack(ctx, row, col, lockTS)
			}
			if err := c.fenceCell(ctx, lock.PrimaryRow, lock.PrimaryCol, lockTS); err != nil {
				return err
			}
		}
	}
	return errLocked
}

// status reads the state of the transaction that started at startTS from
// its primary cell.
func (c *Client) status(ctx context.Context, prow []byte, pcol string, startTS uint64) (txnStatus, error) {
	r, err := c.read(ctx, prow, statusFilter(pcol, startTS))
	if err != nil {
		return txnStatus{}, err
	}
	return statusOf(r.Cells, startTS)
}

// statusFilter is what status reads of the cell (row, col) for the
// transaction at startTS: its lock with its heartbeats, and the write
// records at or after startTS.
func statusFilter(col string, startTS uint64) storage.Filter {
	return storage.Filter{
		beatSelector(col, startTS),
		{Family: FamilyLock, Qualifier: col, Time: storage.At(startTS)},
		{Family: FamilyWrite, Qualifier: col, Time: storage.From(startTS)},
	}
}

// statusOf decides a status from the cells status reads: the lock's wall
// time there is the newest of its own and its heartbeats'.
func statusOf(cells []storage.Cell, startTS uint64) (txnStatus, error) {
	others := false
	for i := range cells {
		cell := &cells[i]
		if cell.Family == FamilyBeat {
			continue
		}
		if cell.Family == FamilyLock {
			l, err := decodeLock(cell.Value)
			l.WallMS = lockWall(&l, cells)
			return txnStatus{kind: stLocked, lock: l}, err
		}
		w, err := DecodeWrite(cell.Value)
		if err != nil {
			return txnStatus{}, err
		}
		switch {
		case w.Op == OpRollback && cell.TS == startTS:
			return txnStatus{kind: stRolledBack}, nil
		case w.Op != OpRollback && w.StartTS == startTS:
			return txnStatus{kind: stCommitted, commitTS: cell.TS}, nil
		}
		others = true
	}
	if others {
		// A write record at or after startTS of another transaction (a
		// commit, or a rollback record, which a prewrite's predicate
		// counts as well): a prewrite of the cell at startTS can never
		// succeed now.
		return txnStatus{kind: stRolledBack}, nil
	}
	return txnStatus{kind: stAbsent}, nil
}

// alive reports whether a lock's owner may still commit it: the lock has
// not expired and the coordination service does not know the owner dead.
func (c *Client) alive(ctx context.Context, l *Lock) bool {
	if c.nowMS() > l.WallMS+l.TTLMS {
		return false
	}
	if l.Owner == c.opts.Owner {
		return true
	}
	ok, err := c.live.Alive(ctx, l.Owner)
	return ok || err != nil
}

// rollForward commits the secondary lock at (row, col, lockTS) at
// commitTS, the primary having committed there. Idempotent. Deferred
// where the store has one ordered log: it copies an outcome already
// durable at the primary (the status read settles) onto a lock already
// durable, so a crash that loses it leaves the lock, which the next
// reader rolls forward to the same commit; a reader's read through a
// secondary waits for no sync.
func (c *Client) rollForward(ctx context.Context, row []byte, col string, lockTS, commitTS uint64, l *Lock) error {
	// Safe in any order: conditional on the lock at lockTS, so a late copy
	// applies nothing once it is gone, and re-puts the same commit record
	// while it is there.
	matched, err := c.casDeferred(ctx, row, storage.Filter{{Family: FamilyLock, Qualifier: col, Time: storage.At(lockTS)}},
		rollForwardMutations(col, lockTS, commitTS, l), nil)
	if matched {
		c.stats.rolledForward.Add(1)
	}
	return err
}

// rollBack replaces the lock at (row, col, lockTS) with a rollback record
// (invariant 5). Conditional on the lock, so it can never undo a commit.
func (c *Client) rollBack(ctx context.Context, row []byte, col string, lockTS uint64) error {
	// Safe in any order: conditional on the lock at lockTS (gone after the
	// first copy), and the record it leaves is at start_ts, where no commit
	// can be written.
	matched, err := c.cas(ctx, row, storage.Filter{{Family: FamilyLock, Qualifier: col, Time: storage.At(lockTS)}},
		rollbackMutations(col, lockTS), nil)
	if matched {
		c.stats.rolledBack.Add(1)
	}
	return err
}

// rollBackPrimary is rollBack of a primary lock, which also removes its
// heartbeats (its owner's stop removes them only when it ends the
// transaction itself) and its pushes.
func (c *Client) rollBackPrimary(ctx context.Context, row []byte, col string, lockTS uint64) error {
	// A late copy finds no lock at lockTS and applies nothing; a beat
	// needs that lock, so none can follow the removal.
	matched, err := c.cas(ctx, row, storage.Filter{{Family: FamilyLock, Qualifier: col, Time: storage.At(lockTS)}},
		append(rollbackMutations(col, lockTS), beatRemoval(col, lockTS), pushRemoval(col, lockTS)), nil)
	if matched {
		c.stats.rolledBack.Add(1)
	}
	return err
}

// rollForwardMutations commit a secondary lock: the write record first,
// then the lock's removal (the order index.go's argument 2 rests on).
func rollForwardMutations(col string, lockTS, commitTS uint64, l *Lock) []storage.Mutation {
	w := Write{Op: l.Op, StartTS: lockTS, Inline: l.Inline, Value: l.Value}
	return []storage.Mutation{
		storage.SetCell(FamilyWrite, col, commitTS, encodeWrite(&w)),
		storage.DeleteCell(FamilyLock, col, lockTS),
	}
}

// rollbackMutations replace a lock with a rollback record: the record
// first, then the lock's and the data's removal.
func rollbackMutations(col string, startTS uint64) []storage.Mutation {
	muts := []storage.Mutation{
		storage.SetCell(FamilyWrite, col, startTS, encodeWrite(&Write{Op: OpRollback, StartTS: startTS})),
		storage.DeleteCell(FamilyLock, col, startTS),
		storage.DeleteCell(FamilyData, col, startTS),
	}
	if mutant.On(mutant.SkipRollback) {
		return muts[1:] // breaks invariant 5: no record, a late prewrite succeeds
	}
	return muts
}

// fenceCell leaves a rollback record at a cell that holds nothing of the
// transaction (its primary, or an async commit's row), so that a delayed
// prewrite of it can never succeed. It writes only while the cell still
// holds no lock at startTS and no write at or after it; otherwise the
// caller reads the status again.
func (c *Client) fenceCell(ctx context.Context, prow []byte, pcol string, startTS uint64) error {
	rec := encodeWrite(&Write{Op: OpRollback, StartTS: startTS})
	// Safe in any order: a late copy applies nothing once the prewrite
	// landed (its lock) or anything was decided (a write at or after
	// startTS), and otherwise re-puts the same record.
	_, err := c.cas(ctx, prow, storage.Filter{
		{Family: FamilyLock, Qualifier: pcol, Time: storage.At(startTS)},
		{Family: FamilyWrite, Qualifier: pcol, Time: storage.From(startTS)},
	}, nil, []storage.Mutation{storage.SetCell(FamilyWrite, pcol, startTS, rec)})
	return err
}
