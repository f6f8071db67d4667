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
type heartbeat struct {
	once sync.Once
	quit chan struct{}
	done chan struct{}
}

func (c *Client) startHeartbeat(t *Txn, primary *mutation) *heartbeat {
	hb := &heartbeat{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(hb.done)
		tick := time.NewTicker(c.opts.LockTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-hb.quit:
				return
			case <-tick.C:
				_, _ = c.refreshLock(context.Background(), t.startTS, primary)
			}
		}
	}()
	return hb
}

// stop ends the heartbeat and waits for it; safe to call twice.
func (hb *heartbeat) stop() {
	hb.once.Do(func() { close(hb.quit) })
	<-hb.done
}

// refreshLock rewrites the primary lock at startTS with the current wall
// time, if it still exists. It reports whether it did.
func (c *Client) refreshLock(ctx context.Context, startTS uint64, primary *mutation) (bool, error) {
	l := c.lockFor(primary, primary)
	return c.cas(ctx, primary.row,
		storage.Filter{{Family: FamilyLock, Qualifier: primary.col, Time: storage.At(startTS)}},
		[]storage.Mutation{storage.SetCell(FamilyLock, primary.col, startTS, EncodeLock(&l))}, nil)
}
