package oracle

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Throughput runs callers goroutines that call c.Timestamp back to back for
// d and returns the timestamps obtained per second. It is the measurement
// behind `percolator bench`. It stops early, with the error, if ctx is
// done or a Timestamp call fails.
func Throughput(ctx context.Context, c *Client, callers int, d time.Duration) (perSecond float64, err error) {
	if callers < 1 || d <= 0 {
		return 0, fmt.Errorf("%w: throughput with %d callers for %v", ErrInvalidArgument, callers, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var stop atomic.Bool
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()

	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		// A context per caller: callers selecting on one shared Done
		// channel would contend on its lock and measure that instead.
		callerCtx, callerCancel := context.WithCancel(ctx)
		wg.Go(func() {
			defer callerCancel()
			n, err := timestampLoop(callerCtx, c, &stop)
			total.Add(n)
			if err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return float64(total.Load()) / elapsed.Seconds(), nil
}

// timestampLoop calls c.Timestamp until stop is set or a call fails, and
// returns the number of timestamps obtained.
func timestampLoop(ctx context.Context, c *Client, stop *atomic.Bool) (int64, error) {
	var n int64
	for !stop.Load() {
		if _, err := c.Timestamp(ctx); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
