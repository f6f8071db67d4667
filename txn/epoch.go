package txn

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// The commit over a store with epochs (storage.Epoched: a server): every
// prewrite in one call per chunk of rows, answered before its log sync;
// the commit point and the secondaries' commits in one durable call,
// refused if the server restarted since the prewrites (doc.go,
// "Durability over RPC").

// Chunks of a transaction's prewrites: one call carries at most
// prewriteChunkRows rows or, past the first row, about
// prewriteChunkBytes of writes, well within a server's message limit.
const (
	prewriteChunkRows  = 512
	prewriteChunkBytes = 4 << 20
)

// commitEpoched is commit (commit.go) over c.epoched. t is marked done.
// Where the server takes commit timestamps itself (storage.EpochStamper),
// the commit point asks it to, under the latches (doc.go, "Durability
// over RPC", step 2): one round trip fewer on the commit's path.
func (c *Client) commitEpoched(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed, obsVer uint64) error {
	primary := &t.writes[0]
	epoch, err := c.prewriteRows(ctx, t, rows, primary, obs)
	if err != nil {
		return c.abort(ctx, t, rows, err)
	}
	if c.crashed(crashAfterPrimaryPrewrite) || c.crashed(crashAfterSecondaryPrewrite) {
		return errCrashed
	}
	hb := c.startHeartbeat(t, primary)
	defer hb.stop()
	stamp := c.stampsCommits()
	commitTS, err := c.readyToCommit(ctx, t, rows, obs, obsVer, stamp)
	if err != nil {
		return err
	}
	ctx, cancel := c.commitPointContext(ctx)
	defer cancel()
	secondaries := rows[1:]
	if mutant.On(mutant.SecondariesFirst) {
		// Breaks invariant 4, as in commit.
		if stamp {
			stamp = false
			if commitTS, err = c.oracle.Timestamp(ctx); err != nil {
				return c.abort(ctx, t, rows, err)
			}
		}
		c.commitSecondaries(ctx, t, secondaries, commitTS)
		secondaries = nil
		time.Sleep(20 * time.Millisecond)
	}
	rw := rows[0]
	// stamped: a stamped call was sent; one that failed may have applied
	// or may still land, at a timestamp this client never learned, so a
	// commit record of its own at any timestamp is its commit.
	stamped := false
	for try := 0; ; try++ {
		var (
			matched bool
			after   []*rowWrites
		)
		if stamp {
			var ts uint64
			ts, matched, after, err = c.commitPointStamped(ctx, t, epoch, rw, secondaries, obsVer)
			stamped = true
			if errors.Is(err, storage.ErrNoOnePhase) || errors.Is(err, storage.ErrObserversMoved) {
				// Refused, nothing applied: a server older than the call
				// (never asked again), or a registration since the
				// prewrites were built. Commit as readyToCommit does:
				// the registry read again, a timestamp of the client's.
				if errors.Is(err, storage.ErrNoOnePhase) {
					c.noEpochStamp.Store(true)
				}
				stamp = false
				if commitTS, err = c.notifyAndTimestamp(ctx, t, rows, obs, obsVer); err != nil {
					return c.abortAfterStamp(ctx, t, rw, err)
				}
				try--
				continue
			}
			commitTS = ts
		} else {
			matched, after, err = c.commitPointInEpoch(ctx, t, epoch, rw, secondaries, commitTS, true)
		}
		if err == nil && matched {
			hb.stop()
			c.stats.commits.Add(1)
			if c.crashed(crashAfterPrimaryCommit) {
				return nil // committed: a crash here loses nothing
			}
			c.commitSecondaries(ctx, t, after, commitTS)
			return nil
		}
		if stamped {
			// No repush: the server's timestamp is above every push the
			// call could meet. commitTS 0: any commit record of ours.
			commitTS, err = c.settleCommit(ctx, t, rw, 0, err, false, false)
		} else {
			_, err = c.settleCommit(ctx, t, rw, commitTS, err, false, try < maxRepush)
		}
		if err == nil {
			break
		}
		if err != errRepush {
			return err
		}
		if commitTS, err = c.repushTimestamp(ctx, t, rw); err != nil {
			return err
		}
	}
	// Committed by an earlier copy of the call, with its secondaries;
	// their commits again, to be sure, are harmless.
	hb.stop()
	c.stats.commits.Add(1)
	c.commitSecondaries(ctx, t, rows[1:], commitTS)
	return nil
}

// abortAfterStamp ends a commit whose stamped commit point was refused
// and which then could not go on (err): settled from the primary, as a
// failed commit point is, since a copy of the call sent before the
// refusal may have applied.
func (c *Client) abortAfterStamp(ctx context.Context, t *Txn, rw *rowWrites, err error) error {
	if _, serr := c.settleCommit(ctx, t, rw, 0, err, false, false); serr != nil {
		return serr
	}
	// An earlier copy committed it.
	c.stats.commits.Add(1)
	return nil
}

// stampsCommits reports whether this client's commit points over a
// server ask the server for their commit timestamps: its store takes
// them (storage.EpochStamper, and has not refused). The server then
// checks the observer registry's version under the latches too, in
// place of the client's re-read (doc.go, "Durability over RPC").
func (c *Client) stampsCommits() bool {
	return c.epochStamp != nil && !c.noEpochStamp.Load()
}

// commitPointStamped is commitPointInEpoch with the commit timestamp
// taken by the server (storage.EpochStamper): the primary's and the
// carried secondaries' commit records are stamped with it, under the
// latches, after the predicate matched. No unless: every push the
// predicate's row holds was written, under its latch, at a timestamp
// handed out before this call took the latch, so below the one it takes.
func (c *Client) commitPointStamped(ctx context.Context, t *Txn, epoch uint64, rw *rowWrites, secondaries []*rowWrites, obsVer uint64) (commitTS uint64, matched bool, after []*rowWrites, err error) {
	if mutant.On(mutant.CommitStampEarly) {
		return c.commitStampEarly(ctx, t, epoch, rw, secondaries)
	}
	var then, stamped []storage.RowMutation
	for size := 0; len(then) < len(secondaries) && len(then) < prewriteChunkRows && size < prewriteChunkBytes; {
		srw := secondaries[len(then)]
		records, unlocks := c.commitRecords(t, srw)
		then = append(then, storage.RowMutation{Row: srw.row, Mutations: unlocks})
		stamped = append(stamped, storage.RowMutation{Row: srw.row, Mutations: records})
		size += mutationsSize(srw.row, records) + mutationsSize(srw.row, unlocks)
	}
	after = secondaries[len(then):]
	primary := rw.muts[0]
	records, unlocks := c.commitRecords(t, rw)
	check := storage.RowCheck{
		Row:       rw.row,
		Predicate: storage.Filter{{Family: FamilyLock, Qualifier: primary.col, Time: storage.At(t.startTS)}},
		IfTrue:    unlocks,
	}
	stamped = append(stamped, storage.RowMutation{Row: rw.row, Mutations: records})
	// Safe in any order, as commitPointInEpoch's: a late copy finds the
	// lock gone and applies nothing, and settleCommit reads the primary
	// to learn what an earlier copy did, and at which timestamp.
	var observers *uint64
	if c.observers != nil {
		observers = &obsVer
	}
	matched, err = c.resendCAS(func() (bool, error) {
		var m bool
		commitTS, m, err = c.epochStamp.CommitInEpoch(ctx, epoch, check, then, stamped, observers)
		return m, err
	})
	return commitTS, matched, after, err
}

// commitPointInEpoch sends the commit point of rw, the primary's row, at
// commitTS in epoch, with the commit records of as many secondaries as one
// prewrite chunk holds: conditional on the primary lock and, with
// unless (always but in a mutant), on no push at or above commitTS
// (RowCheck.Unless). after are the secondaries it did not carry,
// committed after it, as commit does.
func (c *Client) commitPointInEpoch(ctx context.Context, t *Txn, epoch uint64, rw *rowWrites, secondaries []*rowWrites, commitTS uint64, unless bool) (matched bool, after []*rowWrites, err error) {
	// The secondaries' commit records ride with the commit point, applied
	// only if it applies: blind, as commitSecondaries' are (a late copy of
	// the call finds the primary's lock gone and applies nothing).
	var then []storage.RowMutation
	for size := 0; len(then) < len(secondaries) && len(then) < prewriteChunkRows && size < prewriteChunkBytes; {
		srw := secondaries[len(then)]
		m := storage.RowMutation{Row: srw.row, Mutations: c.commitMutations(t, srw, commitTS)}
		size += mutationsSize(srw.row, m.Mutations)
		then = append(then, m)
	}
	after = secondaries[len(then):]
	primary := rw.muts[0]
	check := storage.RowCheck{
		Row:       rw.row,
		Predicate: storage.Filter{{Family: FamilyLock, Qualifier: primary.col, Time: storage.At(t.startTS)}},
		IfTrue:    c.commitMutations(t, rw, commitTS),
	}
	if unless {
		check.Unless = pushesFrom(primary.col, t.startTS, commitTS)
	}
	// Safe in any order, as commitPrimary's call: a late copy finds the
	// lock gone, or a push at or above commitTS, and applies nothing. A
	// copy refused for its epoch applied nothing, but an earlier one may
	// have: settleCommit learns which.
	matched, err = c.resendCAS(func() (bool, error) {
		return c.epoched.CheckAndMutateInEpoch(ctx, epoch, check, then)
	})
	return matched, after, err
}

// commitStampEarly is the mutant commit-stamp-early's commit point: a
// stamped commit's, no unless, but its timestamp taken before the call
// reaches the latches (from the oracle, then the call held until a
// reader pushed the primary, or for stampEarlyHold: the window opened
// whatever the machine's speed). It breaks invariant 2: the push lands
// above the commit, whose reader read past its lock.
func (c *Client) commitStampEarly(ctx context.Context, t *Txn, epoch uint64, rw *rowWrites, secondaries []*rowWrites) (uint64, bool, []*rowWrites, error) {
	ts, err := c.oracle.Timestamp(ctx)
	if err != nil {
		return 0, false, nil, err
	}
	primary := rw.muts[0]
	for deadline := time.Now().Add(stampEarlyHold); time.Now().Before(deadline); {
		if r, err := c.read(ctx, rw.row, pushesFrom(primary.col, t.startTS, 0)); err != nil || len(r.Cells) > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	matched, after, err := c.commitPointInEpoch(ctx, t, epoch, rw, secondaries, ts, false)
	return ts, matched, after, err
}

// stampEarlyHold bounds how long the mutant commit-stamp-early holds a
// commit point for a push.
const stampEarlyHold = 200 * time.Millisecond

// prewriteRows prewrites every row of the transaction (prewrite.go) in
// calls of c.epoched that are answered before their log sync, and returns
// the server's epoch they were applied in. Rows blocked only by locks it
// resolved are prewritten again, as prewrite does. Calls answered in two
// epochs fail the transaction: the server restarted in between, and what
// the first applied may be lost.
func (c *Client) prewriteRows(ctx context.Context, t *Txn, rows []*rowWrites, primary *mutation, obs Observed) (uint64, error) {
	checks := make([]storage.RowCheck, len(rows))
	for i, rw := range rows {
		pred, _, muts := c.prewriteCall(t, rw, primary, obs)
		// Safe in any order (prewrite): a copy before the commit point
		// finds only its own lock; one after it a write record at or after
		// start_ts.
		checks[i] = storage.RowCheck{Row: rw.row, Predicate: pred, IfFalse: muts}
	}
	pending := make([]int, len(rows))
	for i := range pending {
		pending[i] = i
	}
	var epoch uint64
	for try := 0; ; try++ {
		blocked, e, err := c.prewriteChunks(ctx, checks, pending)
		if epoch == 0 {
			epoch = e
		}
		if err == nil && e != epoch {
			err = errEpochsDiffer
		}
		if errors.Is(err, errEpochsDiffer) {
			return 0, &ConflictError{Row: primary.row, Column: primary.col, StartTS: t.startTS,
				Reason: "the server restarted during the prewrites: what they wrote before may be lost"}
		}
		if err != nil {
			return 0, err
		}
		if len(blocked) == 0 {
			return epoch, nil
		}
		var conflict error
		all := true
		for _, i := range blocked {
			resolved, err := c.prewriteConflict(ctx, t.startTS, rows[i], checks[i].Predicate)
			all = all && resolved
			if conflict == nil {
				conflict = err
			}
		}
		if !all || try == prewriteRetries {
			return 0, conflict
		}
		pending = blocked
	}
}

// prewriteChunks sends the checks of rows idx, in chunks (in parallel
// when there are several), and returns the rows whose predicate matched
// (blocked: nothing written there) and the epoch, the same for every
// chunk or a ConflictError.
func (c *Client) prewriteChunks(ctx context.Context, checks []storage.RowCheck, idx []int) (blocked []int, epoch uint64, err error) {
	var chunks [][]int
	for start := 0; start < len(idx); {
		end, size := start, 0
		for end < len(idx) && end-start < prewriteChunkRows && (end == start || size < prewriteChunkBytes) {
			size += checkSize(&checks[idx[end]])
			end++
		}
		chunks = append(chunks, idx[start:end])
		start = end
	}
	matched := make([][]bool, len(chunks))
	epochs := make([]uint64, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(prewriteParallel)
	for k, chunk := range chunks {
		g.Go(func() error {
			batch := make([]storage.RowCheck, len(chunk))
			for j, i := range chunk {
				batch[j] = checks[i]
			}
			var err error
			for range c.opts.StoreRetries + 1 {
				if matched[k], epochs[k], err = c.epoched.CheckAndMutateRowsDeferred(gctx, batch); err == nil || !retryable(err) {
					return err
				}
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	for k, chunk := range chunks {
		if epochs[k] != epochs[0] {
			return nil, 0, errEpochsDiffer
		}
		for j, i := range chunk {
			if matched[k][j] {
				blocked = append(blocked, i)
			}
		}
	}
	return blocked, epochs[0], nil
}

// errEpochsDiffer: calls of one transaction's prewrites were answered in
// two epochs (the server restarted between them).
var errEpochsDiffer = errors.New("txn: prewrites answered in two epochs")

// checkSize is about what a check's writes weigh on the wire.
func checkSize(ch *storage.RowCheck) int { return mutationsSize(ch.Row, ch.IfFalse) }

// mutationsSize is about what a row's mutations weigh on the wire.
func mutationsSize(row []byte, ms []storage.Mutation) int {
	n := len(row)
	for i := range ms {
		n += len(ms[i].Qualifier) + len(ms[i].Value) + 16
	}
	return n
}
