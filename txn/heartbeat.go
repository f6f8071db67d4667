package txn

import (
	"context"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// heartbeat keeps a long commit's primary lock from expiring: every
// LockTTL/3 it rewrites the lock with a fresh wall time, with a
// CheckAndMutate on the lock at its own start_ts — never a blind write,
// which after the commit would resurrect the lock (invariant 7).
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
	hb.mu.Unlock()
	defer hb.beating.Done()
	_, _ = hb.c.refreshLock(hb.ctx, hb.startTS, hb.primary)
	hb.mu.Lock()
	if !hb.mu.stopped {
		hb.mu.timer.Reset(hb.period)
	}
	hb.mu.Unlock()
}

// stop ends the heartbeat and waits for a beat in flight; safe to call
// twice.
func (hb *heartbeat) stop() {
	hb.mu.Lock()
	hb.mu.stopped = true
	hb.mu.timer.Stop()
	hb.mu.Unlock()
	hb.cancel()
	hb.beating.Wait()
}

// refreshLock rewrites the primary lock at startTS with the current wall
// time, if it still exists. It reports whether it did.
func (c *Client) refreshLock(ctx context.Context, startTS uint64, primary *mutation) (bool, error) {
	l := c.lockFor(primary, primary)
	return c.cas(ctx, primary.row,
		storage.Filter{{Family: FamilyLock, Qualifier: primary.col, Time: storage.At(startTS)}},
		[]storage.Mutation{storage.SetCell(FamilyLock, primary.col, startTS, EncodeLock(&l))}, nil)
}
