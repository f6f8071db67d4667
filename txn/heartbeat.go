package txn

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// FamilyBeat holds the heartbeats of primary locks: a beat of the lock at
// (row, c, start_ts) is a cell of qualifier beatQualifier(c, start_ts)
// whose version is the owner's wall time in milliseconds when it beat. The
// lock's wall time is the newest of its own WallMS and its beats'
// versions (lockWall).
//
// Why versions, and not a rewrite of the lock with a fresh wall time: a
// heartbeat is sent without a nonce (it is safe to apply twice), so a
// copy may land late, after the next beat. A rewrite would then set the
// older time, and the lock would look expired early; a storage predicate
// cannot compare a stored value with the one written, only select cells
// by family, qualifier and version. A beat instead adds a version, and a
// late one adds an older version, which the newest hides. A late copy of
// the prewrite, which rewrites the lock with its first wall time, is
// harmless for the same reason.
const FamilyBeat = "beat"

// beatQualifier is the qualifier of the beats of the lock of column col at
// startTS: col (which holds no NUL), NUL, then startTS, so every
// transaction's beats are its own.
func beatQualifier(col string, startTS uint64) string {
	return string(binary.BigEndian.AppendUint64(append([]byte(col), 0), startTS))
}

// beatSelector selects the newest beat of the lock of col at startTS.
func beatSelector(col string, startTS uint64) storage.Selector {
	return storage.Selector{Family: FamilyBeat, Qualifier: beatQualifier(col, startTS), Limit: 1}
}

// lockWall returns the lock's wall time given the cells read with its
// beatSelector: the newest of its own and its beats'.
func lockWall(l *Lock, beats []storage.Cell) uint64 {
	wall := l.WallMS
	for i := range beats {
		if beats[i].Family == FamilyBeat {
			wall = max(wall, beats[i].TS)
		}
	}
	return wall
}

// heartbeat keeps a long commit's primary lock from expiring: every
// LockTTL/3 it adds a beat at the current wall time (FamilyBeat), with a
// CheckAndMutate on the lock at its own start_ts — never a blind write,
// which after the commit would resurrect the transaction's liveness
// (invariant 7). Beats are strictly increasing versions; each one removes
// the one before it.
//
// It is a timer, not a goroutine: most commits end long before the first
// beat, and then it costs only the timer.
type heartbeat struct {
	c       *Client
	startTS uint64
	primary *mutation
	period  time.Duration
	// ctx is the beats' context, cancelled by stop: a beat in flight
	// must not hold the commit past its end (a store that does not
	// answer would have it retry for its whole budget).
	ctx    context.Context
	cancel context.CancelFunc
	mu     struct {
		sync.Mutex
		timer   *time.Timer
		stopped bool
		// last is the version of the last beat sent (0: none). Only the
		// beat in flight changes it.
		last uint64
		// reaped: stop has removed the beats (or had none to remove).
		reaped bool
	}
	beating sync.WaitGroup // a beat in flight
}

func (c *Client) startHeartbeat(t *Txn, primary *mutation) *heartbeat {
	hb := &heartbeat{c: c, startTS: t.startTS, primary: primary, period: c.opts.LockTTL / 3}
	hb.ctx, hb.cancel = context.WithCancel(context.Background())
	hb.mu.Lock()
	hb.mu.timer = time.AfterFunc(hb.period, hb.beat)
	hb.mu.Unlock()
	return hb
}

func (hb *heartbeat) beat() {
	hb.mu.Lock()
	if hb.mu.stopped {
		hb.mu.Unlock()
		return
	}
	hb.beating.Add(1)
	prev := hb.mu.last
	wall := max(hb.c.nowMS(), prev+1)
	hb.mu.last = wall
	hb.mu.Unlock()
	defer hb.beating.Done()
	_, _ = hb.c.beatLock(hb.ctx, hb.startTS, hb.primary, wall, prev)
	hb.mu.Lock()
	if !hb.mu.stopped {
		hb.mu.timer.Reset(hb.period)
	}
	hb.mu.Unlock()
}

// stop ends the heartbeat, waits for a beat in flight, and then, if it
// beat at all, removes its beats once the lock is gone (the commit point
// or a rollback erased it): the removal is a CheckAndMutate that applies
// only where the lock at start_ts no longer exists, so after a crash of
// the commit (the lock left for readers to resolve) it changes nothing.
// Safe to call twice; the second call does nothing.
func (hb *heartbeat) stop() {
	hb.mu.Lock()
	hb.mu.stopped = true
	hb.mu.timer.Stop()
	hb.mu.Unlock()
	hb.cancel()
	hb.beating.Wait()
	hb.mu.Lock()
	beat, reaped := hb.mu.last != 0, hb.mu.reaped
	hb.mu.reaped = true
	hb.mu.Unlock()
	if beat && !reaped {
		// Bounded like any cleanup: a store that does not answer must
		// not hold the commit's return (the beats left are harmless).
		ctx, cancel := context.WithTimeout(context.Background(), hb.c.opts.CleanupTimeout)
		defer cancel()
		hb.c.reapBeats(ctx, hb.primary.row, hb.primary.col, hb.startTS)
	}
}

// refreshLock beats for the primary lock at startTS at the current wall
// time, if the lock still exists. It reports whether it did.
func (c *Client) refreshLock(ctx context.Context, startTS uint64, primary *mutation) (bool, error) {
	return c.beatLock(ctx, startTS, primary, c.nowMS(), 0)
}

// beatLock adds the beat wall of the primary lock at startTS, and removes
// the beat prev (0: none), if the lock exists. Safe to apply twice in any
// order: a late copy adds an older version, which the newest hides, and
// removes only a version older than its own; after the lock is gone it
// applies nothing.
func (c *Client) beatLock(ctx context.Context, startTS uint64, primary *mutation, wall, prev uint64) (bool, error) {
	q := beatQualifier(primary.col, startTS)
	muts := []storage.Mutation{storage.SetCell(FamilyBeat, q, wall, nil)}
	if prev != 0 && prev != wall {
		muts = append(muts, storage.DeleteCell(FamilyBeat, q, prev))
	}
	return c.cas(ctx, primary.row,
		storage.Filter{{Family: FamilyLock, Qualifier: primary.col, Time: storage.At(startTS)}}, muts, nil)
}

// reapBeats removes every beat of the lock of (row, col) at startTS once
// that lock is gone. Safe to apply twice in any order: no beat can be
// added once the lock is gone. A failure leaves the beats, which no one
// reads (they name a transaction that has ended): it is logged.
func (c *Client) reapBeats(ctx context.Context, row []byte, col string, startTS uint64) {
	_, err := c.cas(ctx, row, storage.Filter{{Family: FamilyLock, Qualifier: col, Time: storage.At(startTS)}},
		nil, []storage.Mutation{beatRemoval(col, startTS)})
	if err != nil {
		c.opts.Logger.Warn("txn: removing the heartbeats of an ended transaction", "start_ts", startTS, "err", err)
	}
}

// beatRemoval removes every beat of the lock of col at startTS.
func beatRemoval(col string, startTS uint64) storage.Mutation {
	return storage.Mutation{Kind: storage.DeleteCells, Family: FamilyBeat, Qualifier: beatQualifier(col, startTS)}
}
