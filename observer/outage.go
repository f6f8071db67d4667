package observer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// Outages. A scanner's pass can fail for reasons that pass: the store or
// the coordination service unreachable for a while (a restart, a cut
// connection, etcd killed), a liveness lease lost and granted again, an
// advisory lock that could not be taken, a commit whose outcome could not
// be learned. None of them may end a worker: the scanner backs off and
// scans again, picking up where the notifications are (they stay until
// cleared, invariant 2). Only what no retry can mend ends Run: the store
// failed or closed, the DB's oracle closed or its lease lost (the DB must
// be reopened), or a malformed call (a bug).

// outageBackoff bounds a scanner's wait between passes that failed.
const (
	outageFirstWait = 50 * time.Millisecond
	outageMaxWait   = 2 * time.Second
)

// fatal reports whether err ends the worker instead of being retried.
func fatal(err error) bool {
	for _, e := range []error{storage.ErrFailed, storage.ErrClosed, storage.ErrBudgetSpent, oracle.ErrClosed, oracle.ErrLeaseLost,
		storage.ErrInvalidArgument, txn.ErrInvalidArgument, ErrInvalidArgument} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// outage logs a failing stretch once, when it begins and when it ends,
// not once per failed pass.
type outage struct {
	mu      sync.Mutex
	failing int // scanners whose last pass failed
	passes  int // failed passes in this stretch
}

// outageBegan records the failed pass of a scanner that was not failing.
func (f *Framework) outageBegan(err error) {
	f.outage.mu.Lock()
	defer f.outage.mu.Unlock()
	f.outage.passes++
	f.outage.failing++
	if f.outage.failing == 1 {
		f.opts.Logger.Warn("observer: scanning failed; retrying (notifications stay until processed)", "err", err)
	}
}

func (f *Framework) outageFailedAgain() {
	f.outage.mu.Lock()
	f.outage.passes++
	f.outage.mu.Unlock()
}

func (f *Framework) outageEnded() {
	f.outage.mu.Lock()
	defer f.outage.mu.Unlock()
	f.outage.failing--
	if f.outage.failing == 0 {
		f.opts.Logger.Info("observer: scanning again after a failing stretch", "failed_passes", f.outage.passes)
		f.outage.passes = 0
	}
}

// retryPass waits before a scanner's next pass after a failed one,
// returning false when ctx ended.
func retryPass(ctx context.Context, wait *time.Duration) bool {
	if err := ctxwait.Sleep(ctx, *wait); err != nil {
		return false
	}
	*wait = min(2**wait, outageMaxWait)
	return true
}

// ridingOut runs fn until it succeeds, fails for a reason other than an
// outage (or one that ends the worker, fatal), or ctx ends, backing off
// between attempts: the steps of Run around its scanners (finishing
// backfills, the drain's report) ride out what the scanners ride out.
func (f *Framework) ridingOut(ctx context.Context, what string, fn func() error) error {
	wait := outageFirstWait
	for tries := 0; ; tries++ {
		err := fn()
		if err == nil || !unreachable(err) || fatal(err) {
			return err
		}
		if tries == 0 {
			f.opts.Logger.Warn("observer: "+what+" failed; retrying", "err", err)
		}
		if !retryPass(ctx, &wait) {
			return err
		}
	}
}
