package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// crashAfterOnePhase: a one-phase commit's write applied, the process
// died before it learned so.
const crashAfterOnePhase = "after-one-phase-commit"

// onePhaseGuarded is the embedded store's variant of CommitOnePhase
// whose predicate the owner's index may decide under the row latch, and
// whose guard checks the owner's registry.
type onePhaseGuarded interface {
	CommitOnePhaseGuarded(ctx context.Context, row []byte, cond storage.Cond, predicate storage.Filter, mutations, stamped []storage.Mutation, guard func() error) (uint64, bool, error)
}

// onePhaseAwaiter is the embedded store's wait for a one-phase commit of
// a row in flight (pebble.Store.AwaitOnePhase).
type onePhaseAwaiter interface {
	AwaitOnePhase(ctx context.Context, row []byte) error
}

// errTwoPhase: the one-phase commit applied nothing, and the commit goes
// on in two phases.
var errTwoPhase = errors.New("txn: commit in two phases")

// refusedOnePhase reports a refusal of a one-phase commit that applied
// nothing (the store takes none, or the registry moved): final, not sent
// again.
func refusedOnePhase(err error) bool {
	return errors.Is(err, storage.ErrNoOnePhase) || errors.Is(err, storage.ErrObserversMoved)
}

// mayCommitOnePhase reports whether t commits in one call: its writes
// fall in one row, the store takes one-phase commits, and obs observes
// none of its columns (an observed column's change is announced by its
// lock's notification).
func (c *Client) mayCommitOnePhase(rows []*rowWrites, obs Observed) bool {
	if len(rows) != 1 || c.onePhase == nil || c.noOnePhase.Load() {
		return false
	}
	for _, m := range rows[0].muts {
		if announced(obs, m) {
			return false
		}
	}
	return true
}

// commitOnePhase commits t, whose writes fall in rw, in one conditional
// write (doc.go, "One-phase commit"): where no cell of the row has a lock
// of another transaction, a write record at or after start_ts or a GC
// fence at or above it, the store takes the commit timestamp from its
// process's oracle under the row latch and writes the data and the
// commit records at once. There is no lock, so nothing to roll back or
// forward. It returns errTwoPhase, having written nothing, when the store
// turns out to take none, or the observer registry moved past obsVer,
// the version the commit was built under (doc.go, "One-phase commit",
// on registrations); the caller commits in two phases.
func (c *Client) commitOnePhase(ctx context.Context, t *Txn, rw *rowWrites, obsVer uint64) error {
	writes, muts, stamped := c.onePhaseCall(t, rw)
	if c.opts.Session != nil {
		if err := c.opts.Session(); err != nil {
			c.stats.aborts.Add(1)
			return fmt.Errorf("%w: %w", ErrSessionLost, err)
		}
	}
	// The call is the commit point: it goes on past the caller's context
	// for CleanupTimeout, as a two-phase commit point does.
	cctx, cancel := c.commitPointContext(ctx)
	defer cancel()
	cond := c.prewriteCond(rw, t.startTS)
	// mayLand: a copy sent earlier failed, and may have applied or may
	// still apply (a retry's first copy delayed in the network).
	mayLand := false
	for try := 0; ; try++ {
		var (
			commitTS uint64
			conflict bool
			err      error
		)
		for i := 0; i <= c.opts.StoreRetries; i++ {
			// Safe to send twice, late, or out of order: a copy after the
			// commit finds its own commit records (at or after start_ts),
			// a copy after a rollback record at start_ts finds that; both
			// apply nothing, and the status read below tells them apart.
			commitTS, conflict, err = c.sendOnePhase(cctx, t, rw, cond, writes, muts, stamped, obsVer)
			if err == nil || !retryable(err) || refusedOnePhase(err) {
				break
			}
			mayLand = true
		}
		if refusedOnePhase(err) && try == 0 && !mayLand {
			// Nothing of this commit was applied: two phases may follow
			// at the same start_ts.
			if errors.Is(err, storage.ErrNoOnePhase) {
				c.noOnePhase.Store(true)
			}
			return errTwoPhase
		}
		if err != nil {
			// Unknown, or refused after a copy that may have applied:
			// settled from what the row holds.
			return c.settleOnePhase(cctx, t, rw, fmt.Sprintf("the one-phase commit call failed (%v)", err))
		}
		if c.crashed(crashAfterOnePhase) {
			return errCrashed
		}
		if !conflict {
			c.stats.commits.Add(1)
			c.stats.onePhase.Add(1)
			c.acked(commitTS)
			return nil
		}
		// A conflict, or a copy of this call that applied earlier (its
		// reply lost): the first cell's status says which.
		st, err := c.status(cctx, rw.row, rw.muts[0].col, t.startTS)
		if err == nil && st.kind == stCommitted {
			c.stats.commits.Add(1)
			c.stats.onePhase.Add(1)
			c.acked(st.commitTS)
			return nil
		}
		pred := prewritePredicate(t, rw)
		resolved, err := c.prewriteConflict(cctx, t.startTS, rw, pred)
		if !resolved || try == prewriteRetries {
			if mayLand {
				// A copy that failed may still land once what refused
				// this one is gone (a lock rolled back, a commit record
				// below start_ts): the rollback record refuses it, or
				// finds that it landed.
				return c.settleOnePhase(cctx, t, rw, refusedAfterFailure(err))
			}
			c.stats.conflicts.Add(1)
			return err
		}
	}
}

// sendOnePhase sends the one-phase commit once: through the owner's
// index, checking the owner's registry, where there is one, with the
// predicate's write-record half (writes) for the store to check where
// the index cannot decide; elsewhere with the whole predicate and the
// registry's version for the store to check.
func (c *Client) sendOnePhase(ctx context.Context, t *Txn, rw *rowWrites, cond storage.Cond, writes storage.Filter, muts, stamped []storage.Mutation, obsVer uint64) (uint64, bool, error) {
	if mutant.On(mutant.OnePhaseEarlyTS) {
		pred := prewritePredicate(t, rw)
		return c.onePhaseEarly(ctx, rw, pred, muts, stamped)
	}
	if og, ok := c.onePhase.(onePhaseGuarded); ok && c.index != nil {
		// The owner's registry is this process's: a registration
		// publishes its set before its backfill takes a timestamp, so a
		// commit whose timestamp is later sees it here.
		guard := func() error {
			if c.observers == nil {
				return nil
			}
			if _, v := c.observers.Snapshot(); v != obsVer {
				return storage.ErrObserversMoved
			}
			return nil
		}
		if c.cond == nil {
			cond = nil
		}
		return og.CommitOnePhaseGuarded(ctx, rw.row, cond, writes, muts, stamped, guard)
	}
	var observers *uint64
	if c.observers != nil {
		observers = &obsVer
	}
	pred := prewritePredicate(t, rw)
	return c.onePhase.CommitOnePhase(ctx, rw.row, pred, muts, stamped, observers)
}

// onePhaseEarly is the mutant's commit: a commit timestamp taken from the
// oracle as any other, with no mark on the row, before the conflict-checking
// write. The pause widens the window in which a reader above it reads
// the row before the write lands.
func (c *Client) onePhaseEarly(ctx context.Context, rw *rowWrites, pred storage.Filter, muts, stamped []storage.Mutation) (uint64, bool, error) {
	ts, err := c.oracle.Timestamp(ctx)
	if err != nil {
		return 0, false, err
	}
	time.Sleep(20 * time.Millisecond)
	all := storage.AppendStamped(append([]storage.Mutation(nil), muts...), stamped, ts)
	matched, err := c.store.CheckAndMutate(ctx, rw.row, pred, nil, all)
	return ts, matched, err
}

// onePhaseCall returns the write-record half of the one-phase commit's
// predicate (a prewrite's: prewritePredicate, which the calls that need
// the whole of it build), the data it writes at start_ts and the commit
// records to stamp with the commit timestamp.
func (c *Client) onePhaseCall(t *Txn, rw *rowWrites) (writes storage.Filter, muts, stamped []storage.Mutation) {
	writes = prewriteWrites(t, rw)
	stamped = make([]storage.Mutation, 0, len(rw.muts))
	for _, m := range rw.muts {
		w := Write{Op: m.op, StartTS: t.startTS}
		if m.op == OpPut && c.inline(m.value) {
			w.Inline, w.Value = true, m.value
		} else if m.op == OpPut {
			muts = append(muts, storage.SetCell(FamilyData, m.col, t.startTS, m.value))
		}
		stamped = append(stamped, storage.SetCell(FamilyWrite, m.col, 0, encodeWrite(&w)))
	}
	return writes, muts, stamped
}

// refusedAfterFailure says what happened to a one-phase commit refused by
// err (a conflict) after an earlier copy of its call failed.
func refusedAfterFailure(err error) string {
	reason := err.Error()
	if ce := (*ConflictError)(nil); errors.As(err, &ce) {
		reason = ce.Reason
	}
	return reason + ", after an earlier copy of the one-phase commit call failed"
}

// settleOnePhase decides a one-phase commit whose call failed, or was
// refused after a copy that failed (what says which): a copy of it may
// have applied, or may still. A rollback record at start_ts, where no
// write record of the first cell is at or after it, makes every copy
// still to come find it and apply nothing (invariant 5); where there is
// one, the status read says whose.
func (c *Client) settleOnePhase(ctx context.Context, t *Txn, rw *rowWrites, what string) error {
	col := rw.muts[0].col
	pred := storage.Filter{{Family: FamilyWrite, Qualifier: col, Time: storage.From(t.startTS)}}
	// Safe in any order: it writes the rollback record only where no
	// write record of the cell is at or after start_ts, and a copy finds
	// its own record.
	matched, err := c.cas(ctx, rw.row, pred, nil, rollbackMutations(col, t.startTS)[:1])
	if err != nil {
		return fmt.Errorf("%w: %s (rollback: %v)", ErrCommitUnknown, what, err)
	}
	if !matched {
		c.stats.aborts.Add(1)
		return &ConflictError{Row: rw.row, Column: col, StartTS: t.startTS,
			Reason: what + "; rolled back"}
	}
	st, err := c.status(ctx, rw.row, col, t.startTS)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s (status: %v)", ErrCommitUnknown, what, err)
	case st.kind == stCommitted:
		c.stats.commits.Add(1)
		c.stats.onePhase.Add(1)
		c.acked(st.commitTS)
		return nil
	}
	c.stats.conflicts.Add(1)
	return &ConflictError{Row: rw.row, Column: col, StartTS: t.startTS,
		Reason: what + ", and a newer write committed"}
}
