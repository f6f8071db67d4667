package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// Async commit (doc.go, "Async commit"): a small transaction's prewrites
// go in one call to a store that takes a timestamp under the rows'
// latches and stamps it into each lock; the transaction is committed
// once every row holds its lock, at the greatest stamp, and its commit
// records follow in the background.

// The bounds of an async-commit transaction (TiKV's): its primary lock
// names every other row, and a resolver reads each.
const (
	AsyncMaxWrites   = 256
	AsyncMaxKeyBytes = 4 << 10
)

// Crash points of an async commit, for tests.
const (
	// A prewrite call applied some rows while others wait to be sent
	// again (blocked by a lock it resolves).
	crashBetweenAsyncPrewrites = "between-async-prewrites"
	// Every row holds its lock (the transaction is committed); no
	// commit record is written yet.
	crashAfterAsyncPrewrite = "after-async-prewrite"
)

// asyncRecordsTimeout bounds the background write of an async commit's
// commit records; what it leaves undone, readers roll forward.
const asyncRecordsTimeout = 10 * time.Second

// asyncGuarded is the embedded store's variant of PrewriteAsync whose
// predicates the owner's index may decide under the latches, and whose
// guard checks the owner's registry (pebble.Store.PrewriteAsyncGuarded).
type asyncGuarded interface {
	PrewriteAsyncGuarded(ctx context.Context, checks []storage.AsyncCheck, conds []storage.Cond, guard func() error) (uint64, []bool, error)
}

// mayCommitAsync reports whether t commits asynchronously: the option
// is on, the store takes async prewrites, t writes more than one row
// (one row commits in one phase) and is within the bounds.
func (c *Client) mayCommitAsync(t *Txn, rows []*rowWrites) bool {
	if c.async == nil || c.noAsync.Load() || len(rows) < 2 || len(t.writes) > AsyncMaxWrites || c.notify.apart {
		return false
	}
	keys, size := 0, 0
	for _, rw := range rows {
		for _, m := range rw.muts {
			keys += len(m.row) + len(m.col)
			size += len(m.row) + len(m.col) + len(m.value) + 16
		}
	}
	return keys <= AsyncMaxKeyBytes && size <= prewriteChunkBytes
}

// asyncChecks returns the async prewrite of every row: a prewrite's
// predicate that counts the transaction's own lock too (so a copy of the
// call after the first applied applies nothing, and a row's stamp is
// written once), and its mutations with the locks to stamp. The primary's
// lock names the first cell of every other row.
func (c *Client) asyncChecks(t *Txn, rows []*rowWrites, obs Observed) []storage.AsyncCheck {
	primary := &t.writes[0]
	secondaries := make([]Cell, 0, len(rows)-1)
	for _, rw := range rows[1:] {
		secondaries = append(secondaries, Cell{Row: rw.row, Col: rw.muts[0].col})
	}
	checks := make([]storage.AsyncCheck, len(rows))
	for i, rw := range rows {
		pred := prewritePredicate(t, rw)
		for _, m := range rw.muts {
			pred = append(pred, storage.Selector{Family: FamilyLock, Qualifier: m.col, Time: storage.At(t.startTS)})
		}
		muts, stamped := c.prewriteMutations(t, rw, primary, obs, secondaries)
		checks[i] = storage.AsyncCheck{Row: rw.row, Predicate: pred, Mutations: muts, Stamped: stamped}
	}
	return checks
}

// asyncCond decides an async prewrite's predicate from the owner's index
// where it can: any lock of the row's cells (its own too), then the
// write records as a prewrite's.
func (c *Client) asyncCond(rw *rowWrites, startTS uint64) storage.Cond {
	// No lock is at 0: every lock counts.
	return func() (bool, bool) { return c.index.conflicts(rw, 0, startTS) }
}

// asyncRows is an async commit in progress: the rows whose locks are in,
// with the stamp each got.
type asyncRows struct {
	rows  []*rowWrites
	stamp []uint64 // stamp[i] > 0: rows[i] holds its lock, stamped so
}

func (a *asyncRows) pending() []int {
	var idx []int
	for i, s := range a.stamp {
		if s == 0 {
			idx = append(idx, i)
		}
	}
	return idx
}

// commitTS is the transaction's commit timestamp once every row is in:
// the greatest stamp.
func (a *asyncRows) commitTS() uint64 {
	var ts uint64
	for _, s := range a.stamp {
		ts = max(ts, s)
	}
	return ts
}

// commitAsync commits t, whose rows are rows, asynchronously (doc.go,
// "Async commit"). It returns errTwoPhase, having written nothing, when
// the store turns out to take no async prewrites or the observer
// registry moved past obsVer before any row was written; the caller
// commits in two phases.
func (c *Client) commitAsync(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed, obsVer uint64) error {
	if c.opts.Session != nil {
		if err := c.opts.Session(); err != nil {
			c.stats.aborts.Add(1)
			return fmt.Errorf("%w: %w", ErrSessionLost, err)
		}
	}
	checks := c.asyncChecks(t, rows, obs)
	// Every call may be the one that commits: they go on past the
	// caller's context for CleanupTimeout, as a commit point does.
	ctx, cancel := c.commitPointContext(ctx)
	defer cancel()
	a := &asyncRows{rows: rows, stamp: make([]uint64, len(rows))}
	for try := 0; ; try++ {
		pending := a.pending()
		if len(pending) == 0 {
			break // the rows blocked last were in after all (asyncBlocked)
		}
		ts, conflict, resent, err := c.sendAsync(ctx, t, a, checks, pending, obsVer)
		if refusedOnePhase(err) && try == 0 && !resent && !c.anyLocked(ctx, t, rows) {
			// Nothing of this commit was applied: two phases may follow
			// at the same start_ts.
			if errors.Is(err, storage.ErrNoOnePhase) {
				c.noAsync.Store(true)
			}
			return errTwoPhase
		}
		if err != nil {
			return c.settleAsync(ctx, t, a, fmt.Errorf("the async prewrite call failed: %w", err))
		}
		var blocked []int
		for j, i := range pending {
			if conflict[j] {
				blocked = append(blocked, i)
			} else {
				a.stamp[i] = ts
			}
		}
		if len(blocked) == 0 {
			break
		}
		if len(blocked) < len(a.rows) && c.crashed(crashBetweenAsyncPrewrites) {
			return errCrashed
		}
		if err := c.asyncBlocked(ctx, t, a, checks, blocked, try); err != nil {
			return c.settleAsync(ctx, t, a, err)
		}
	}
	return c.committedAsync(ctx, t, a)
}

// anyLocked reports whether a row of t holds its lock, or may (the read
// failed): a refused call may follow a copy that applied, which a store
// that re-sends on its own (over a server) does not report. Then the
// commit cannot go on in two phases, whose prewrites would take an async
// lock a reader may already have rolled forward for one of their own.
func (c *Client) anyLocked(ctx context.Context, t *Txn, rows []*rowWrites) bool {
	cells := make([]Cell, len(rows))
	for i, rw := range rows {
		cells[i] = Cell{Row: rw.row, Col: rw.muts[0].col}
	}
	sts, err := c.statuses(ctx, cells, t.startTS)
	if err != nil {
		return true
	}
	for _, st := range sts {
		if st.kind != stAbsent {
			return true
		}
	}
	return false
}

// sendAsync sends the async prewrites of rows idx once, re-sent on a
// retryable error (resent then reports that an earlier copy may have
// applied): through the owner's index, checking the owner's registry,
// where there is one; elsewhere with the registry's version for the
// store to check.
func (c *Client) sendAsync(ctx context.Context, t *Txn, a *asyncRows, checks []storage.AsyncCheck, idx []int, obsVer uint64) (ts uint64, conflict []bool, resent bool, err error) {
	batch := make([]storage.AsyncCheck, len(idx))
	for j, i := range idx {
		batch[j] = checks[i]
	}
	send := func() (uint64, []bool, error) {
		var observers *uint64
		if c.observers != nil {
			observers = &obsVer
		}
		return c.async.PrewriteAsync(ctx, batch, observers)
	}
	if ag, ok := c.async.(asyncGuarded); ok && c.index != nil {
		var conds []storage.Cond
		if c.cond != nil {
			conds = make([]storage.Cond, len(idx))
			for j, i := range idx {
				conds[j] = c.asyncCond(a.rows[i], t.startTS)
			}
		}
		send = func() (uint64, []bool, error) {
			return ag.PrewriteAsyncGuarded(ctx, batch, conds, c.registryGuard(obsVer))
		}
	}
	for i := 0; i <= c.opts.StoreRetries; i++ {
		// Safe to send twice, late, or out of order: the predicate counts
		// this transaction's own lock, so a copy after one applied finds
		// its locks (or, once they are resolved, its commit or rollback
		// records at or after start_ts) and applies nothing; what the
		// rows hold tells the copies apart (asyncBlocked).
		ts, conflict, err = send()
		if err == nil || !retryable(err) || refusedOnePhase(err) {
			return ts, conflict, resent, err
		}
		resent = true
	}
	return ts, conflict, resent, err
}

// registryGuard is the owner's registry check under the latch: a
// registration publishes its set before its backfill takes a timestamp,
// so a call whose timestamp is later sees it here.
func (c *Client) registryGuard(obsVer uint64) func() error {
	return func() error {
		if c.observers == nil {
			return nil
		}
		if _, v := c.observers.Snapshot(); v != obsVer {
			return storage.ErrObserversMoved
		}
		return nil
	}
}

// asyncBlocked looks at the rows an async prewrite call did not write:
// a row that holds this transaction's lock was written by an earlier copy
// of a call (its reply lost), and is in with the stamp it holds; the
// others are resolved as a prewrite's blockers. It returns a
// *ConflictError when a row cannot be written (or try is the last),
// nil when the blocked rows may be sent again.
func (c *Client) asyncBlocked(ctx context.Context, t *Txn, a *asyncRows, checks []storage.AsyncCheck, blocked []int, try int) error {
	for _, i := range blocked {
		rw := a.rows[i]
		st, err := c.status(ctx, rw.row, rw.muts[0].col, t.startTS)
		if err != nil {
			return err
		}
		if st.kind == stLocked && st.lock.Async {
			a.stamp[i] = st.lock.MinCommitTS
			continue
		}
		pred := prewritePredicate(t, rw)
		resolved, err := c.prewriteConflict(ctx, t.startTS, rw, pred)
		if !resolved || try == prewriteRetries {
			return err
		}
	}
	return nil
}

// committedAsync ends an async commit all of whose rows are in: the
// transaction is committed at the greatest stamp. The commit records go
// in the background.
func (c *Client) committedAsync(ctx context.Context, t *Txn, a *asyncRows) error {
	c.stats.commits.Add(1)
	c.stats.async.Add(1)
	commitTS := a.commitTS()
	c.acked(commitTS)
	if c.crashed(crashAfterAsyncPrewrite) {
		return nil // committed: a crash here loses nothing
	}
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), asyncRecordsTimeout)
		defer cancel()
		c.commitSecondaries(storage.WithReserve(rctx), t, a.rows, commitTS)
	}()
	return nil
}

// settleAsync decides an async commit that cannot go on (cause says
// why): a call failed with its outcome unknown, a row conflicts, or the
// registry moved after rows were written. The transaction is rolled back
// once one of its rows can never hold its lock: a rollback record at
// start_ts in a row that holds nothing of it (fenceCell), which every
// copy of a call still to come finds. A row that turns out to hold its
// lock is in after all; if every row is, the transaction committed, and
// settleAsync reports that. Rolled back, its locks are removed (blind:
// the transaction is decided) and the result is a *ConflictError; not
// settled (the store unreachable), ErrCommitUnknown, and readers settle
// it once the owner is dead or its locks expired.
func (c *Client) settleAsync(ctx context.Context, t *Txn, a *asyncRows, cause error) error {
	for _, i := range a.pending() {
		rw := a.rows[i]
		col := rw.muts[0].col
		if err := c.fenceCell(ctx, rw.row, col, t.startTS); err != nil {
			return asyncUnknown(cause, fmt.Sprintf("rollback: %v", err))
		}
		st, err := c.status(ctx, rw.row, col, t.startTS)
		switch {
		case err != nil:
			return asyncUnknown(cause, fmt.Sprintf("status: %v", err))
		case st.kind == stCommitted:
			// Every row was in (a copy of a call landed), and a reader
			// rolled the transaction forward.
			c.stats.commits.Add(1)
			c.stats.async.Add(1)
			c.acked(st.commitTS)
			return nil
		case st.kind == stLocked && st.lock.Async:
			a.stamp[i] = st.lock.MinCommitTS
			continue
		case st.kind == stLocked || st.kind == stAbsent:
			return asyncUnknown(cause, fmt.Sprintf("row %s neither locked nor fenced", storage.QuoteRow(rw.row)))
		}
		return c.abort(ctx, t, a.rows, asyncConflict(t, rw, cause))
	}
	// Every row holds its lock: committed.
	return c.committedAsync(ctx, t, a)
}

// asyncUnknown is the error of an async commit whose outcome could not be
// learned after cause: ErrCommitUnknown, wrapping cause unless it is a
// conflict (a caller retries a conflict, and must not retry this).
func asyncUnknown(cause error, detail string) error {
	if errors.Is(cause, ErrConflict) {
		return fmt.Errorf("%w: %v (%s)", ErrCommitUnknown, cause, detail)
	}
	return fmt.Errorf("%w: %w (%s)", ErrCommitUnknown, cause, detail)
}

// asyncConflict is the error of an async commit rolled back for cause.
func asyncConflict(t *Txn, rw *rowWrites, cause error) error {
	var conflict *ConflictError
	if errors.As(cause, &conflict) {
		return cause
	}
	return &ConflictError{Row: rw.row, Column: rw.muts[0].col, StartTS: t.startTS,
		Reason: fmt.Sprintf("%v; rolled back", cause)}
}

// asyncState is what a resolver learns of an async-commit transaction
// from all its rows: decided (committed at commitTS, or rolled back), or
// not yet, with a row that holds nothing of it (missing) and the lock
// whose owner and time say whether it may still come (owner).
type asyncState struct {
	kind     statusKind // stCommitted, stRolledBack, or stLocked: undecided
	commitTS uint64
	missing  Cell
	owner    Lock
}

// asyncStatus decides the transaction of the async lock l, met at (row,
// col, startTS), from every row it writes (doc.go, "Async commit"): the
// primary's status, then, while its lock stands, each secondary's. A row
// with a commit record of it says committed, one with a rollback record
// (or another's newer write, where its lock can never land) rolled back;
// every row locked, committed at the greatest stamp; a row holding
// nothing of it, undecided.
func (c *Client) asyncStatus(ctx context.Context, row []byte, col string, startTS uint64, l *Lock) (asyncState, error) {
	primary := *l
	if !l.IsPrimary(row, col) {
		st, err := c.status(ctx, l.PrimaryRow, l.PrimaryCol, startTS)
		switch {
		case err != nil:
			return asyncState{}, err
		case st.kind == stCommitted || st.kind == stRolledBack:
			return asyncState{kind: st.kind, commitTS: st.commitTS}, nil
		case st.kind == stAbsent:
			return asyncState{kind: stLocked, missing: Cell{Row: l.PrimaryRow, Col: l.PrimaryCol}, owner: *l}, nil
		}
		primary = st.lock
	}
	if !primary.Async {
		return asyncState{}, fmt.Errorf("txn: async lock at %q/%s whose primary is not: %w", row, col, errCorrupt)
	}
	sts, err := c.statuses(ctx, asyncChecked(primary.Secondaries), startTS)
	if err != nil {
		return asyncState{}, err
	}
	st := asyncState{kind: stCommitted, commitTS: primary.MinCommitTS, owner: primary}
	for i, s := range sts {
		switch s.kind {
		case stCommitted, stRolledBack:
			return asyncState{kind: s.kind, commitTS: s.commitTS}, nil
		case stAbsent:
			if st.kind == stCommitted {
				st.kind, st.missing = stLocked, primary.Secondaries[i]
			}
		case stLocked:
			if !s.lock.Async {
				return asyncState{}, fmt.Errorf("txn: secondary %q/%s of an async lock is not async: %w", primary.Secondaries[i].Row, primary.Secondaries[i].Col, errCorrupt)
			}
			st.commitTS = max(st.commitTS, s.lock.MinCommitTS)
		}
	}
	return st, nil
}

// asyncChecked is the secondaries a resolver checks: all of them. The
// mutant async-skip-secondary leaves out the last, and so takes a
// transaction for committed while that row's prewrite may still fail.
func asyncChecked(cells []Cell) []Cell {
	if mutant.On(mutant.AsyncSkipSecondary) && len(cells) > 0 {
		return cells[:len(cells)-1]
	}
	return cells
}

// statuses reads the status of the transaction at startTS in each of
// cells: in one round trip where the store reads several rows at once.
func (c *Client) statuses(ctx context.Context, cells []Cell, startTS uint64) ([]txnStatus, error) {
	sts := make([]txnStatus, len(cells))
	mr, ok := c.store.(storage.MultiReader)
	if !ok || len(cells) < 2 {
		for i, cell := range cells {
			st, err := c.status(ctx, cell.Row, cell.Col, startTS)
			if err != nil {
				return nil, err
			}
			sts[i] = st
		}
		return sts, nil
	}
	reads := make([]storage.RowRead, len(cells))
	for i, cell := range cells {
		reads[i] = storage.RowRead{Row: cell.Row, Filter: statusFilter(cell.Col, startTS)}
	}
	var (
		rows []storage.Row
		err  error
	)
	for i := 0; i <= c.opts.StoreRetries; i++ {
		if rows, err = mr.ReadRows(ctx, reads); err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	for i := range rows {
		if sts[i], err = statusOf(rows[i].Cells, startTS); err != nil {
			return nil, err
		}
	}
	return sts, nil
}

// resolveAsync settles the async lock at (row, col, lockTS) whose content
// is l, for a read at snapshot readTS (0: for a writer or the collector).
// A decided transaction's lock is rolled forward or back. An undecided
// one commits, if ever, above every snapshot taken before its missing row
// was read (doc.go, "Async commit"): a reader reads past it (errPushed);
// a writer waits (errLocked) while the owner may still write that row,
// and otherwise leaves a rollback record there, which decides it.
func (c *Client) resolveAsync(ctx context.Context, row []byte, col string, lockTS uint64, l *Lock, readTS uint64) error {
	for range maxResolveSteps {
		st, err := c.asyncStatus(ctx, row, col, lockTS, l)
		if err != nil {
			return err
		}
		switch {
		case st.kind == stCommitted && readTS != 0 && st.commitTS >= readTS:
			c.stats.asyncReadPast.Add(1)
			return errPushed // its records are in no snapshot at readTS
		case st.kind == stCommitted:
			c.stats.asyncResolved.Add(1)
			return c.rollForward(ctx, row, col, lockTS, st.commitTS, l)
		case st.kind == stRolledBack:
			return c.rollBack(ctx, row, col, lockTS)
		case readTS != 0:
			c.stats.asyncReadPast.Add(1)
			return errPushed
		case c.alive(ctx, &st.owner):
			return errLocked
		}
		c.stats.asyncResolved.Add(1)
		if err := c.fenceCell(ctx, st.missing.Row, st.missing.Col, lockTS); err != nil {
			return err
		}
	}
	return errLocked
}
