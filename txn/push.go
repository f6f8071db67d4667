package txn

import (
	"context"
	"errors"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// FamilyPush holds the pushes of primary locks (doc.go, "Reads through
// locks"): a reader at start_ts T that pushed the transaction whose
// primary lock is (row, c, start_ts) left a cell of qualifier
// pushQualifier(c, start_ts) at version T, meaning "commit above T". The
// commit point applies only while no push of its transaction is at or
// above its commit_ts. Like heartbeats, pushes are versions of a family
// of their own rather than a rewrite of the lock: a storage predicate can
// select cells by version, never compare a stored value, and a late push
// only adds a version. On a store the client owns (pushesInMemory) the
// pushes are kept in its index instead, and nothing is written.
const FamilyPush = "push"

// errPushed is returned by a reader's resolution of a lock whose
// transaction it pushed past its snapshot: the reader reads past the
// lock.
var errPushed = errors.New("txn: lock's transaction pushed past the snapshot")

// errRepush is returned by settleCommit when the commit point was refused
// by a push at or above its commit_ts while the primary lock stands: the
// commit takes a newer timestamp and sends its commit point again.
var errRepush = errors.New("txn: commit point refused by a push")

// maxRepush bounds how many times one commit takes a new commit timestamp
// after a push refused its commit point; past it the commit rolls back
// and fails with a ConflictError (a reader keeps pushing it).
const maxRepush = 8

// pushQualifier is the qualifier of the pushes of the lock of column col
// at startTS: every transaction's pushes are its own, as its beats are.
func pushQualifier(col string, startTS uint64) string { return beatQualifier(col, startTS) }

// pushesFrom selects the pushes of the lock of col at startTS at or above
// ts: the commit point's unless, at ts its commit_ts.
func pushesFrom(col string, startTS, ts uint64) storage.Filter {
	return storage.Filter{{Family: FamilyPush, Qualifier: pushQualifier(col, startTS), Time: storage.From(ts), Limit: 1}}
}

// pushRemoval removes every push of the lock of col at startTS: it rides
// with every write that removes a primary lock (its commit, its
// rollbacks), so pushes do not outlive their lock.
func pushRemoval(col string, startTS uint64) storage.Mutation {
	return storage.Mutation{Kind: storage.DeleteCells, Family: FamilyPush, Qualifier: pushQualifier(col, startTS)}
}

// honoursPushes reports whether this client's commit point honours
// pushes: its store takes an unless filter, and another client may push
// (a shared store), or this one does. A store the client owns alone
// (Indexed: one client per store) holds no push this client did not
// make, so there its commit point reads none unless it reads through
// locks itself.
func (c *Client) honoursPushes() bool {
	switch {
	case c.epoched != nil:
		return true
	case c.unlessed == nil:
		return false
	}
	return c.index == nil || c.opts.ReadThroughLocks
}

// pushing reports whether this client's reads push (Options.ReadThroughLocks).
func (c *Client) pushing() bool { return c.opts.ReadThroughLocks && c.honoursPushes() }

// push asks the transaction whose primary lock is (prow, pcol, startTS) to
// commit above ts: a push cell at version ts, written only while that lock
// is there. It reports whether it applied; when it did not, the lock is
// gone (its transaction decided) and the caller reads its status again.
func (c *Client) push(ctx context.Context, prow []byte, pcol string, startTS, ts uint64) (bool, error) {
	pred := storage.Filter{{Family: FamilyLock, Qualifier: pcol, Time: storage.At(startTS)}}
	if c.pushesInMemory() {
		// Under the primary row's latch, where the index knows the lock
		// exactly: the push's whole effect, nothing written (doc.go,
		// "Reads through locks", durability). Safe twice and late for
		// the reasons below: it only raises a push while the lock stands.
		return c.resendCAS(func() (bool, error) {
			return c.cond.CheckAndMutateCond(ctx, prow, func() (bool, bool) {
				return c.index.push(prow, pcol, startTS, ts), true
			}, pred, nil, nil, true)
		})
	}
	// Safe twice, late, in any order: conditional on the lock at startTS,
	// a copy applies nothing once the transaction is decided, and before
	// that only asks again for a commit above ts, which the first copy
	// already asked for. Deferred where the store has one ordered log
	// (doc.go, "Reads through locks": a crash that loses it ends the
	// transaction it pushed).
	return c.casDeferred(ctx, prow, pred, []storage.Mutation{storage.SetCell(FamilyPush, pushQualifier(pcol, startTS), ts, nil)}, nil)
}

// pushLock pushes the transaction of a live lock (at (row, col, lockTS),
// whose primary is l's) above a reader's snapshot ts: errPushed when it
// applied, nil when the primary's lock is gone (read its status again).
func (c *Client) pushLock(ctx context.Context, row []byte, col string, lockTS, ts uint64, l *Lock) error {
	prow, pcol := l.PrimaryRow, l.PrimaryCol
	if mutant.On(mutant.PushSecondary) {
		// Breaks invariant 2: the push lands at the lock met, which the
		// commit point never reads when it is a secondary's.
		prow, pcol = row, col
	}
	pushed, err := c.push(ctx, prow, pcol, lockTS, ts)
	switch {
	case err != nil:
		return err
	case pushed:
		c.stats.pushes.Add(1)
		if c.crashed(crashAfterPush) {
			return errCrashed
		}
		return errPushed
	}
	return nil
}

// pushedPast reports whether a push of the primary lock of rw's
// transaction stands at or above commitTS (read after a refused commit
// point).
func (c *Client) pushedPast(ctx context.Context, t *Txn, rw *rowWrites, commitTS uint64) (bool, error) {
	if !c.honoursPushes() {
		return false, nil
	}
	if c.pushesInMemory() {
		return c.index.pushedFrom(rw.row, rw.muts[0].col, t.startTS, commitTS), nil
	}
	r, err := c.read(ctx, rw.row, pushesFrom(rw.muts[0].col, t.startTS, commitTS))
	return len(r.Cells) > 0, err
}

// pushesInMemory reports whether pushes live in the index rather than in
// the store: on a store this client owns, whose conditional writes ask
// the index under the row latch (doc.go, "Reads through locks").
func (c *Client) pushesInMemory() bool { return c.index != nil && c.cond != nil }

// casCommitPoint is the commit point's conditional write: casIndexed on
// the primary lock (locked, pred) and, where pushes are honoured, unless
// no push is at or above commitTS.
func (c *Client) casCommitPoint(ctx context.Context, t *Txn, rw *rowWrites, commitTS uint64, locked storage.Cond, pred storage.Filter, muts []storage.Mutation) (bool, error) {
	if !c.honoursPushes() {
		return c.casIndexed(ctx, rw.row, locked, pred, pred, muts, nil, false)
	}
	if c.pushesInMemory() {
		// The index's pushes, read under the same latch as the lock.
		col := rw.muts[0].col
		unpushed := func() (bool, bool) {
			if c.index.pushedFrom(rw.row, col, t.startTS, commitTS) {
				return false, true
			}
			return locked()
		}
		return c.casIndexed(ctx, rw.row, unpushed, pred, pred, muts, nil, false)
	}
	unless := pushesFrom(rw.muts[0].col, t.startTS, commitTS)
	if cu, ok := c.store.(storage.CondUnlessed); ok && c.cond != nil {
		return c.resendCAS(func() (bool, error) {
			return cu.CheckAndMutateCondUnless(ctx, rw.row, locked, pred, unless, muts, nil, false)
		})
	}
	return c.resendCAS(func() (bool, error) {
		return c.unlessed.CheckAndMutateUnless(ctx, rw.row, pred, unless, muts, nil)
	})
}
