package queue

import (
	"context"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// storeClock bounds the store's clock from one reading and this process's
// monotonic clock, so that most calls need no clock round trip. A reading
// r taken by a request sent at local time l0 and answered at l1 means the
// store's time at a later local time l lies in
//
//	[r + (l − l1)(1 − ρ), r + res + (l − l0)(1 + ρ)]
//
// (res: the store clock's resolution, a millisecond). Expiry is judged by
// the low bound (never early) and stamped from the high one (never short).
// The reading is refreshed when it is older than refresh.
type storeClock struct {
	clock   storage.Clock
	drift   float64
	refresh time.Duration
	// local is this process's monotonic clock: time.Now (a test drives
	// its own).
	local func() time.Time

	mu     sync.Mutex
	r      int64     // the reading, in store milliseconds
	l0, l1 time.Time // its request's send and reply times (monotonic)
}

// bounds returns the low and high bounds of the store's time now, in
// milliseconds.
func (c *storeClock) bounds(ctx context.Context) (lo, hi int64, err error) {
	c.mu.Lock()
	fresh := !c.l1.IsZero() && c.local().Sub(c.l1) < c.refresh
	c.mu.Unlock()
	if !fresh {
		l0 := c.local()
		t, err := c.clock.Now(ctx)
		if err != nil {
			return 0, 0, err
		}
		l1 := c.local()
		c.mu.Lock()
		if c.l1.IsZero() || l1.After(c.l1) {
			c.r, c.l0, c.l1 = t.UnixMilli(), l0, l1
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.local()
	lo = c.r + int64(float64(now.Sub(c.l1))*(1-c.drift))/int64(time.Millisecond)
	hi = c.r + 1 + ceilMS(float64(now.Sub(c.l0))*(1+c.drift))
	return lo, hi, nil
}

func ceilMS(ns float64) int64 {
	return (int64(ns) + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}
