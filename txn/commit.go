package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// Crash points of a commit, for tests: an unexported hook stops the commit
// right after the named step, as if the process died there.
const (
	crashAfterPrimaryPrewrite   = "after-primary-prewrite"
	crashAfterSecondaryPrewrite = "after-secondary-prewrite" // after each
	crashAfterSessionCheck      = "after-session-check"      // just before the commit point
	crashAfterPrimaryCommit     = "after-primary-commit"
	crashAfterSecondaryCommit   = "after-secondary-commit" // after each batch
	// An abort's: the primary's row rolled back, the others not yet.
	crashAfterPrimaryRollback = "after-primary-rollback"
	// A read's crash point: its push applied, the reader died before
	// reading (push.go).
	crashAfterPush = "after-push"
)

// unversionedSkip is how many commits after a reply without a registry
// version take the parallel path before the oracle's version is tried
// again.
const unversionedSkip = 64

// prewriteParallel bounds concurrent secondary prewrites of one commit.
const prewriteParallel = 16

// commit runs the two phases (doc.go, "Commit"). t is marked done. The
// commit is one operation (Options.Operation), its abort and cleanup
// included.
func (c *Client) commit(ctx context.Context, t *Txn) error {
	ctx = c.operation(ctx)
	rows := groupByRow(t.writes)
	primary := &t.writes[0]
	obs, obsVer := c.observedSnapshot()
	if c.mayCommitOnePhase(rows, obs) {
		if err := c.commitOnePhase(ctx, t, rows[0], obsVer); !errors.Is(err, errTwoPhase) {
			return err
		}
		obs, obsVer = c.observedSnapshot()
	}
	if c.mayCommitAsync(t, rows) {
		if err := c.commitAsync(ctx, t, rows, obs, obsVer); !errors.Is(err, errTwoPhase) {
			return err
		}
		obs, obsVer = c.observedSnapshot()
	}
	if err := c.notifyAhead(ctx, t, rows, obs); err != nil {
		return c.abort(ctx, t, nil, err)
	}
	if c.epoched != nil {
		return c.commitEpoched(ctx, t, rows, obs, obsVer)
	}
	if mutant.On(mutant.SkipRollback) && c.notify.apart && obs != nil && rand.IntN(3) == 0 {
		c.awaitAheadCleared(ctx, t, rows, obs)
	}
	if err := c.prewrite(ctx, t, rows[0], primary, obs); err != nil {
		return c.abort(ctx, t, rows[:1], err)
	}
	if c.crashed(crashAfterPrimaryPrewrite) {
		return errCrashed
	}
	hb := c.startHeartbeat(t, primary)
	defer hb.stop()
	if err := c.prewriteSecondaries(ctx, t, rows[1:], primary, obs); err != nil {
		if errors.Is(err, errCrashed) {
			return err
		}
		return c.abort(ctx, t, rows, err)
	}
	commitTS, err := c.readyToCommit(ctx, t, rows, obs, obsVer, false)
	if err != nil {
		return err
	}
	ctx, cancel := c.commitPointContext(ctx)
	defer cancel()
	if mutant.On(mutant.SecondariesFirst) {
		// Breaks invariant 4: the secondaries commit before the commit
		// point. The pause widens the window a crash must fall in for the
		// break to show, so that a kill nemesis of a few seconds finds it.
		c.commitSecondaries(ctx, t, rows[1:], commitTS)
		rows = rows[:1]
		time.Sleep(20 * time.Millisecond)
	}
	commitTS, err = c.commitPrimary(ctx, t, rows[0], commitTS)
	if err != nil {
		return err
	}
	hb.stop()
	c.stats.commits.Add(1)
	c.acked(commitTS)
	if c.crashed(crashAfterPrimaryCommit) {
		return nil // committed: a crash here loses nothing
	}
	c.commitSecondaries(ctx, t, rows[1:], commitTS)
	return nil
}

// readyToCommit re-reads the observer registry and takes the commit
// timestamp once every prewrite is in (unless stamp: the server does
// both at the commit point, and it returns 0), and checks the session. Its error is the commit's outcome
// already: the transaction was aborted, or errCrashed.
func (c *Client) readyToCommit(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed, obsVer uint64, stamp bool) (uint64, error) {
	// Every lock exists: a registration made since the prewrites were
	// built either shows in the registry now, or backfills these locks.
	// The commit timestamp, also due only after the last prewrite, is
	// fetched meanwhile when the registry's re-read is a store call.
	var commitTS uint64
	var err error
	if stamp {
		// The server reads the registry's version at the commit point,
		// under its latches, and refuses it if the version moved past
		// obsVer (epoch.go). A caller's context that ended stops the
		// commit here, as the timestamp's call would have.
		err = ctx.Err()
	} else {
		commitTS, err = c.notifyAndTimestamp(ctx, t, rows, obs, obsVer)
	}
	if err != nil {
		return 0, c.abort(ctx, t, rows, err)
	}
	if c.opts.Session != nil {
		if err := c.opts.Session(); err != nil {
			return 0, c.abort(ctx, t, rows, fmt.Errorf("%w: %w", ErrSessionLost, err))
		}
	}
	if c.crashed(crashAfterSessionCheck) {
		return 0, errCrashed
	}
	return commitTS, nil
}

// commitPointContext is the context of a commit from its commit point
// on, where the outcome is decided by the primary's commit: the calls go
// on if the caller's context ends, for CleanupTimeout more, so that a
// cancellation does not leave a commit half-rolled-forward; past it an
// outcome not learned is ErrCommitUnknown, and a secondary not committed
// is rolled forward by its readers (invariant 4). The commit, and a
// rollback settleCommit makes, may use a nearly full store's reserve:
// they finish a transaction whose locks are written, and free them
// (doc.go, "A nearly full disk").
func (c *Client) commitPointContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := c.detach(ctx)
	return storage.WithReserve(ctx), cancel
}

func (c *Client) prewriteSecondaries(ctx context.Context, t *Txn, rows []*rowWrites, primary *mutation, obs Observed) error {
	if c.crash != nil { // deterministic order for crash tests
		for _, rw := range rows {
			if err := c.prewrite(ctx, t, rw, primary, obs); err != nil {
				return err
			}
			if c.crashed(crashAfterSecondaryPrewrite) {
				return errCrashed
			}
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(prewriteParallel)
	for _, rw := range rows {
		g.Go(func() error { return c.prewrite(gctx, t, rw, primary, obs) })
	}
	return g.Wait()
}

// commitPrimary writes the commit records of the primary's row and
// removes its locks, conditional on the primary lock and, where pushes
// are honoured, on no push at or above commitTS: the commit point. A
// commit point a push refused is sent again at a newer commit timestamp
// (at most maxRepush times); it returns the commit timestamp the
// transaction committed at.
func (c *Client) commitPrimary(ctx context.Context, t *Txn, rw *rowWrites, commitTS uint64) (uint64, error) {
	primary := rw.muts[0]
	pred := storage.Filter{{Family: FamilyLock, Qualifier: primary.col, Time: storage.At(t.startTS)}}
	locked := func() (bool, bool) { return c.index.hasLock(rw.row, primary.col, t.startTS), true }
	for try := 0; ; try++ {
		// Safe in any order: a late copy re-puts the same commit records
		// at commit_ts where the lock at start_ts still is and no push
		// reached commit_ts, and applies nothing once the lock is gone
		// (committed, or rolled back: a rollback record) or a push did
		// (pushes stay as long as the lock).
		matched, err := c.casCommitPoint(ctx, t, rw, commitTS, locked, pred, c.commitMutations(t, rw, commitTS))
		if err == nil && matched {
			return commitTS, nil
		}
		// Unknown (the call failed) or not applied (the lock is gone, or
		// a push refused it): learn what happened from the primary itself.
		_, err = c.settleCommit(ctx, t, rw, commitTS, err, false, try < maxRepush)
		if err != errRepush {
			return commitTS, err
		}
		if commitTS, err = c.repushTimestamp(ctx, t, rw); err != nil {
			return 0, err
		}
	}
}

// repushTimestamp takes a new commit timestamp after a push refused the
// commit point: above every push that stands (each one's timestamp was
// handed out before the push was written, and so before this call,
// invariant 1). A commit that cannot get one rolls its primary back, as
// settleCommit does a commit point that did not apply.
func (c *Client) repushTimestamp(ctx context.Context, t *Txn, rw *rowWrites) (uint64, error) {
	c.stats.repushed.Add(1)
	ts, err := c.oracle.Timestamp(ctx)
	if err == nil {
		return ts, nil
	}
	primary := rw.muts[0]
	if rerr := c.rollBackPrimary(ctx, primary.row, primary.col, t.startTS); rerr != nil {
		return 0, fmt.Errorf("%w: commit timestamp: %v (rollback: %v)", ErrCommitUnknown, err, rerr)
	}
	c.stats.aborts.Add(1)
	return 0, fmt.Errorf("txn: commit timestamp after a push: %w", err)
}

// settleCommit decides a commit whose primary call failed or found no
// lock, and returns the timestamp it committed at. A retried commit
// succeeds only on its own commit record, never on a rollback record
// (invariant 6): at commitTS, or, where commitTS is 0 (the server took
// it: CommitInEpoch), at whatever timestamp its record has. ownRollback
// reports that this client rolled its own primary back (its commit call
// had not applied), so the conflict is not blamed on another client.
// mayRepush lets it return errRepush where the primary is still locked
// and a push at or above commitTS stands: no copy of the call can apply
// then (the push stays as long as the lock), and the caller commits at
// a newer timestamp.
func (c *Client) settleCommit(ctx context.Context, t *Txn, rw *rowWrites, commitTS uint64, callErr error, ownRollback, mayRepush bool) (uint64, error) {
	primary := rw.muts[0]
	st, err := c.status(ctx, primary.row, primary.col, t.startTS)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %v (status: %v)", ErrCommitUnknown, callErr, err)
	case st.kind == stCommitted && (st.commitTS == commitTS || commitTS == 0):
		return st.commitTS, nil
	case st.kind == stRolledBack || st.kind == stAbsent:
		c.stats.conflicts.Add(1)
		reason := "rolled back by another client before the commit"
		switch {
		case errors.Is(callErr, storage.ErrEpochChanged):
			// The commit point was refused: what the prewrites wrote
			// before the server restarted may be lost (epoch.go).
			reason = "the server restarted between the prewrites and the commit point; rolled back"
		case ownRollback && callErr == nil:
			reason = "readers kept pushing its commit timestamp; rolled back"
		case ownRollback:
			reason = fmt.Sprintf("the commit call failed (%v); rolled back", callErr)
		}
		return 0, &ConflictError{Row: primary.row, Column: primary.col, StartTS: t.startTS, Reason: reason}
	case st.kind == stLocked && !ownRollback:
		// A commit point refused for its epoch is settled as a failed
		// one whatever pushes stand: a new timestamp would not help.
		if mayRepush && !errors.Is(callErr, storage.ErrEpochChanged) {
			if pushed, err := c.pushedPast(ctx, t, rw, commitTS); err == nil && pushed {
				return 0, errRepush
			}
		}
		// The commit call did not apply (yet). Roll back our own primary, so
		// a late delivery of that call finds no lock and applies nothing.
		if err := c.rollBackPrimary(ctx, primary.row, primary.col, t.startTS); err != nil {
			return 0, fmt.Errorf("%w: %v (rollback: %v)", ErrCommitUnknown, callErr, err)
		}
		return c.settleCommit(ctx, t, rw, commitTS, callErr, true, false)
	case st.kind == stLocked:
		return 0, fmt.Errorf("%w: %v (our rollback of the primary did not apply)", ErrCommitUnknown, callErr)
	}
	return 0, fmt.Errorf("%w: primary committed at %d, not %d", ErrCommitUnknown, st.commitTS, commitTS)
}

// commitMutations commit the cells of rw: for each cell its commit record
// and then its lock's removal. The order matters to readers of the index
// without the latch (index.go, argument 2; TestCommitMutationOrder).
func (c *Client) commitMutations(t *Txn, rw *rowWrites, commitTS uint64) []storage.Mutation {
	muts := make([]storage.Mutation, 0, 2*len(rw.muts)+1)
	for _, m := range rw.muts {
		w := Write{Op: m.op, StartTS: t.startTS}
		if m.op == OpPut && c.inline(m.value) {
			w.Inline, w.Value = true, m.value
		}
		muts = append(muts,
			storage.SetCell(FamilyWrite, m.col, commitTS, encodeWrite(&w)),
			storage.DeleteCell(FamilyLock, m.col, t.startTS))
	}
	if c.opts.ReadThroughLocks && bytes.Equal(rw.row, t.writes[0].row) {
		// The primary's pushes go with its lock. (Without the option a
		// push is rare, another client's: the collector removes it.)
		muts = append(muts, pushRemoval(t.writes[0].col, t.startTS))
	}
	return muts
}

// commitRecords splits commitMutations(t, rw, ts) for a server that
// stamps the commit timestamp (CommitInEpoch): records, the commit
// records, at a timestamp the server replaces; unlocks, the rest.
func (c *Client) commitRecords(t *Txn, rw *rowWrites) (records, unlocks []storage.Mutation) {
	for _, m := range c.commitMutations(t, rw, t.startTS) {
		if m.Family == FamilyWrite {
			records = append(records, m)
		} else {
			unlocks = append(unlocks, m)
		}
	}
	return records, unlocks
}

// commitSecondaries rolls the secondaries forward, blind: the primary has
// committed, so anyone may (invariant 4), and a repeat rewrites the same
// cells. A failure is logged and left to readers, who roll forward.
func (c *Client) commitSecondaries(ctx context.Context, t *Txn, rows []*rowWrites, commitTS uint64) {
	for len(rows) > 0 {
		n := min(len(rows), c.secondaryBatch)
		if err := c.commitBatch(ctx, t, rows[:n], commitTS); err != nil {
			c.opts.Logger.Warn("txn: secondary commit failed; readers will roll it forward",
				"start_ts", t.startTS, "commit_ts", commitTS, "err", err)
		}
		rows = rows[n:]
		if c.crashed(crashAfterSecondaryCommit) {
			return
		}
	}
}

func (c *Client) commitBatch(ctx context.Context, t *Txn, rows []*rowWrites, commitTS uint64) error {
	var send func(context.Context, []storage.RowMutation) ([]error, error)
	switch {
	case c.deferred != nil:
		send = c.deferred.MutateRowsDeferred
	case c.epoched != nil:
		// Over a server, answered before their log sync too: a commit
		// record lost in a restart leaves its lock, durable, which
		// readers roll forward to the same commit (doc.go, "Durability").
		send = c.commitDeferred
	case c.batch != nil && (len(rows) > 1 || c.batchIdem):
		// A late copy re-puts the same commit records at commit_ts and
		// erases each lock only at its exact start_ts: safe in any order,
		// so over a server it goes without a nonce (batchIdem), one row
		// too.
		send = c.batch.MutateRows
	default:
		for _, rw := range rows {
			if err := c.mutate(ctx, rw.row, c.commitMutations(t, rw, commitTS)...); err != nil {
				return err
			}
		}
		return nil
	}
	batch := make([]storage.RowMutation, len(rows))
	for i, rw := range rows {
		batch[i] = storage.RowMutation{Row: rw.row, Mutations: c.commitMutations(t, rw, commitTS)}
	}
	return c.sendRows(ctx, send, batch)
}

// sendRows sends batch, whose every row's mutations are safe to apply
// twice in any order (each caller says why), through send, re-sending
// it on error; it returns the rows' errors joined, or the call's.
func (c *Client) sendRows(ctx context.Context, send func(context.Context, []storage.RowMutation) ([]error, error), batch []storage.RowMutation) error {
	var err error
	for range c.opts.StoreRetries + 1 {
		var errs []error
		if errs, err = send(ctx, batch); err == nil {
			return errors.Join(errs...)
		}
		if !retryable(err) {
			return err
		}
	}
	return err
}

// commitDeferred sends rows' commit mutations as one deferred call of a
// server (storage.Epoched): checks whose predicate selects nothing, so
// each row's mutations apply. Safe in any order, as every commit batch
// is: it re-puts the same commit records and erases each lock only at
// its exact start_ts.
func (c *Client) commitDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	checks := make([]storage.RowCheck, len(rows))
	for i := range rows {
		checks[i] = storage.RowCheck{Row: rows[i].Row, IfFalse: rows[i].Mutations}
	}
	_, _, err := c.epoched.CheckAndMutateRowsDeferred(ctx, checks)
	return nil, err
}

// abort rolls back what the owner prewrote and returns cause. The owner
// never sent the primary's commit, so no one can have committed it, and
// the rollback may be blind: primary row first, then the others
// (invariant 4), in batches where the store takes them (each row's
// rollback is safe in any order, so a batch's rows may apply in any
// order too). Rows whose prewrite may be in flight get a rollback record
// too, so a late delivery can never apply (invariant 5). The rollback
// goes on after ctx ends, for CleanupTimeout; what it leaves undone (the
// store unreachable, the time up) readers roll back once the owner is
// dead or the locks expired.
func (c *Client) abort(ctx context.Context, t *Txn, rows []*rowWrites, cause error) error {
	if errors.Is(cause, ErrConflict) {
		c.stats.conflicts.Add(1)
	} else {
		c.stats.aborts.Add(1)
	}
	if len(rows) == 0 {
		return cause
	}
	ctx, cancel := c.detach(ctx)
	defer cancel()
	ctx = storage.WithReserve(ctx) // it frees the locks written
	// The primary row alone, and first: until its rollback record is
	// written, a reader that meets a secondary's lock finds the primary's.
	if err := c.mutate(ctx, rows[0].row, c.rowRollback(t, rows[0])...); err != nil {
		c.opts.Logger.Warn("txn: rollback failed; readers will roll it back", "start_ts", t.startTS, "err", err)
		return cause // the primary's lock stays; resolution handles the rest
	}
	if c.crashed(crashAfterPrimaryRollback) {
		return errCrashed
	}
	step := 1
	if c.batch != nil {
		step = c.secondaryBatch
	}
	for rest := rows[1:]; len(rest) > 0; {
		n := min(len(rest), step)
		var err error
		if n == 1 {
			err = c.mutate(ctx, rest[0].row, c.rowRollback(t, rest[0])...)
		} else {
			batch := make([]storage.RowMutation, n)
			for i, rw := range rest[:n] {
				batch[i] = storage.RowMutation{Row: rw.row, Mutations: c.rowRollback(t, rw)}
			}
			err = c.sendRows(ctx, c.batch.MutateRows, batch)
		}
		if err != nil {
			c.opts.Logger.Warn("txn: rollback failed; readers will roll it back", "start_ts", t.startTS, "err", err)
			break
		}
		rest = rest[n:]
	}
	return cause
}

// rowRollback is the mutations that roll back t's cells of rw: for
// each, its rollback record and the removal of its lock and data at
// start_ts; on the primary's row its pushes too (they go with the lock).
// Blind, and safe in any order: a late copy re-puts the same rollback
// records and erases only this transaction's lock and data at its
// start_ts, which no later write re-creates (a late prewrite meets the
// rollback record).
func (c *Client) rowRollback(t *Txn, rw *rowWrites) []storage.Mutation {
	muts := make([]storage.Mutation, 0, 3*len(rw.muts)+1)
	for _, m := range rw.muts {
		muts = append(muts, rollbackMutations(m.col, t.startTS)...)
	}
	if bytes.Equal(rw.row, t.writes[0].row) {
		muts = append(muts, pushRemoval(t.writes[0].col, t.startTS))
	}
	return muts
}

// notifyAndTimestamp runs notifyMissed and fetches the commit timestamp:
// in parallel when the registry re-read goes to the store (a shared store),
// in turn otherwise (the embedded store's registry is in memory).
func (c *Client) notifyAndTimestamp(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed, obsVer uint64) (uint64, error) {
	if c.observers == nil || c.index != nil {
		if err := c.notifyMissed(ctx, t, rows, obs, obsVer); err != nil {
			return 0, err
		}
		ts, err := c.oracle.Timestamp(ctx)
		if err != nil {
			return 0, fmt.Errorf("txn: commit timestamp: %w", err)
		}
		return ts, nil
	}
	// After a reply without a version (an oracle that reads no store) the
	// next commits fetch the timestamp and re-read the registry in
	// parallel, trying the oracle's version again now and then (another
	// oracle may lead by then).
	if vo, ok := c.oracle.(VersionedOracle); ok && c.unversioned.Add(-1) < 0 {
		c.unversioned.Store(0)
		if rt, ok := c.observers.(RefreshedTo); ok {
			// One round trip: the commit timestamp, and the registry
			// version the oracle read after allocating it.
			ts, v, ok, err := vo.TimestampVersion(ctx)
			if err != nil {
				return 0, fmt.Errorf("txn: commit timestamp: %w", err)
			}
			if ok {
				now, nowVer, err := rt.RefreshTo(ctx, v)
				if err == nil {
					err = c.notifyNewlyObserved(ctx, t, rows, obs, obsVer, now, nowVer)
				}
				return ts, err
			}
			c.unversioned.Store(unversionedSkip)
			return ts, c.notifyMissed(ctx, t, rows, obs, obsVer)
		}
	}
	type stamp struct {
		ts  uint64
		err error
	}
	ch := make(chan stamp, 1)
	go func() {
		ts, err := c.oracle.Timestamp(ctx)
		ch <- stamp{ts, err}
	}()
	nerr := c.notifyMissed(ctx, t, rows, obs, obsVer)
	st := <-ch
	switch {
	case nerr != nil:
		return 0, nerr
	case st.err != nil:
		return 0, fmt.Errorf("txn: commit timestamp: %w", st.err)
	}
	return st.ts, nil
}

// awaitAheadCleared holds a commit of the skip-rollback mutant between
// its notifications and its prewrite until a worker cleared the first of
// them (or for at most aheadHold): the window in which a clear skips the
// fence its prewrite needs, opened whatever the speed of the machine,
// where a pause of fixed length closed before a loaded machine's workers
// got to the notification. It is this goroutine's alone: the process's
// liveness session lives on.
func (c *Client) awaitAheadCleared(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed) {
	const aheadHold, poll = 10 * time.Second, 20 * time.Millisecond
	var row []byte
	var col string
	for _, rw := range rows {
		for _, m := range rw.muts {
			if row == nil && announced(obs, m) {
				row, col = rw.row, m.col
			}
		}
	}
	if row == nil {
		return
	}
	for end := time.Now().Add(aheadHold); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(poll) {
		ns, err := c.notify.Read(ctx, row)
		if err != nil {
			return
		}
		if !slices.ContainsFunc(ns, func(n Notification) bool { return n.Column == col && n.TS == t.startTS }) {
			return
		}
	}
}
