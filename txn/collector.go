package txn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/internal/ctxwait"
)

// activeSet counts a client's transactions begun and not yet ended, by
// start_ts.
type activeSet struct {
	mu sync.Mutex
	n  map[uint64]int
}

func (a *activeSet) add(ts uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[uint64]int{}
	}
	a.n[ts]++
}

func (a *activeSet) remove(ts uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[ts]--; a.n[ts] <= 0 {
		delete(a.n, ts)
	}
}

// oldest returns the oldest start_ts of an active transaction.
func (a *activeSet) oldest() (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var o uint64
	for ts := range a.n {
		if o == 0 || ts < o {
			o = ts
		}
	}
	return o, o != 0
}

// OldestActive returns the start_ts of the oldest transaction of this
// client that has begun and not ended (Commit or Rollback), and whether
// there is one: what this process publishes to hold the safe point back.
func (c *Client) OldestActive() (uint64, bool) { return c.active.oldest() }

// DefaultGCLifetime is how long a sampled timestamp waits before it may
// become the safe point (TiKV's default).
const DefaultGCLifetime = 10 * time.Minute

// CollectorOptions shape RunCollector.
type CollectorOptions struct {
	// Lifetime is how long, on this process's monotonic clock, a sampled
	// timestamp waits before it may become the safe point. Default
	// DefaultGCLifetime.
	Lifetime time.Duration
	// Interval is the time between samples. Default Lifetime/10, at
	// least 100ms and at most a minute.
	Interval time.Duration
	// Oldest returns the oldest start_ts any live transaction or
	// registered reader of any process needs, and whether there is one;
	// the safe point stays at or below it. Default: this client's own
	// (OldestActive).
	Oldest func(ctx context.Context) (uint64, bool, error)
	// Pass, if set, is told of each pass.
	Pass func(CollectorPass)
	// delay is how long a new safe point waits, durable, before deletion
	// below it (test knob; 0: CollectDelay, negative: none).
	delay time.Duration
}

// CollectorPass is what one pass did.
type CollectorPass struct {
	SafePoint uint64
	Collected
	Skipped  int // rows left for a live lock
	Duration time.Duration
}

type sample struct {
	ts uint64
	at time.Time // on the monotonic clock
}

// RunCollector runs the garbage collector until ctx ends (doc.go,
// "Garbage collection"): it samples a timestamp every Interval; a sample
// Lifetime old, held back to the oldest start_ts anyone needs, is
// proposed as the safe point; once a higher safe point is durable it waits
// CollectDelay (longer than any client caches an older one) and collects
// the keyspace below it. Samples live in memory: after a restart nothing
// is collected for one Lifetime.
func (c *Client) RunCollector(ctx context.Context, o CollectorOptions) error {
	if o.Lifetime <= 0 {
		o.Lifetime = DefaultGCLifetime
	}
	if o.Interval <= 0 {
		o.Interval = min(max(o.Lifetime/10, 100*time.Millisecond), time.Minute)
	}
	if o.Oldest == nil {
		o.Oldest = func(context.Context) (uint64, bool, error) { ts, ok := c.OldestActive(); return ts, ok, nil }
	}
	if o.delay == 0 {
		o.delay = CollectDelay
	}
	var samples []sample
	var collected uint64 // the safe point the last full pass ran at
	for {
		if ts, err := c.oracle.Timestamp(ctx); err == nil {
			samples = append(samples, sample{ts: ts, at: time.Now()})
		} else if ctx.Err() != nil {
			return nil
		}
		// The newest sample old enough, and the younger ones kept.
		cand := uint64(0)
		for len(samples) > 0 && time.Since(samples[0].at) >= o.Lifetime {
			cand, samples = samples[0].ts, samples[1:]
		}
		if cand != 0 {
			if err := c.collectAt(ctx, o, cand, &collected); err != nil && ctx.Err() == nil {
				c.opts.Logger.Warn("txn: garbage collection", "err", err)
			}
		}
		if err := ctxwait.Sleep(ctx, o.Interval); err != nil {
			return nil
		}
	}
}

// collectAt proposes cand, held back to the oldest start_ts needed, and
// collects below the safe point if it rose past the last pass's.
func (c *Client) collectAt(ctx context.Context, o CollectorOptions, cand uint64, collected *uint64) error {
	oldest, ok, err := o.Oldest(ctx)
	if err != nil {
		return err
	}
	if ok && oldest < cand {
		cand = oldest
	}
	if cand <= *collected {
		return nil
	}
	sp, err := AdvanceSafePoint(ctx, c.store, cand)
	if err != nil {
		return err
	}
	if sp <= *collected {
		return nil
	}
	if o.delay > 0 {
		if err := ctxwait.Sleep(ctx, o.delay); err != nil {
			return err
		}
	}
	start := time.Now()
	got, skipped, _, err := c.CollectBelow(ctx, sp, nil)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err == nil && skipped == 0 {
		*collected = sp
	}
	if o.Pass != nil {
		o.Pass(CollectorPass{SafePoint: sp, Collected: got, Skipped: skipped, Duration: time.Since(start)})
	}
	return err
}
