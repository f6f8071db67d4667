package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
	"github.com/seed-992972ee/percolator/lock"
)

// lockHolds is leased locks with fencing tokens (package lock): each
// operation acquires one of two locks with a short lease, acts for up to
// 20ms while the lease is valid, and releases it, recording the lease it
// held (history.Lease). Checked: tokens are unique and increase in the
// order the leases were held, and no two holders' leases overlap.
type lockHolds struct {
	prefix  string
	mu      sync.Mutex
	lockers map[*percolator.DB]*lock.Locker
}

// lockTTL is a hold's lease: short, so that a holder killed or paused
// with it is outlived within the run.
const lockTTL = 500 * time.Millisecond

func (w *lockHolds) Name() string { return "lock" }

func (w *lockHolds) Setup(context.Context, *percolator.DB) error { return nil }

func (w *lockHolds) Next(rng *rand.Rand) (string, []history.Mop) {
	return "hold", []history.Mop{{F: history.Hold, Key: []string{"a", "b"}[rng.IntN(2)]}}
}

// locker is db's Locker, made once per DB.
func (w *lockHolds) locker(db *percolator.DB) (*lock.Locker, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if lk := w.lockers[db]; lk != nil {
		return lk, nil
	}
	lk, err := lock.New(db.Store(), lock.Options{})
	if err != nil {
		return nil, err
	}
	if w.lockers == nil {
		w.lockers = map[*percolator.DB]*lock.Locker{}
	}
	w.lockers[db] = lk
	return lk, nil
}

// Apply holds the lock. Failing to acquire is a failed operation (nothing
// was held); once granted, the lease is recorded whatever the release's
// outcome, which only decides ok (released) or unknown.
func (w *lockHolds) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	lk, err := w.locker(db)
	if err != nil {
		return mops, errors.Join(errBeforeCommit, err)
	}
	l, err := lk.Acquire(ctx, w.prefix+mops[0].Key, lockTTL)
	if err != nil {
		return mops, errors.Join(errBeforeCommit, err)
	}
	granted := history.Now()
	lease := &history.Lease{Token: l.Token, Granted: granted, Deadline: granted + int64(time.Until(l.Deadline()))}
	mops[0].Lease = lease
	act := time.Duration(rand.Int64N(int64(20 * time.Millisecond)))
	if until := time.Until(l.Deadline()); act > until {
		act = max(until, 0)
	}
	time.Sleep(act) // acting, while the lease is valid
	lease.Released = history.Now()
	return mops, lk.Release(ctx, l)
}

func (w *lockHolds) Final() (string, []history.Mop) { return "", nil }

func (w *lockHolds) Check(h []history.Op) history.Result { return history.CheckLock(h) }
