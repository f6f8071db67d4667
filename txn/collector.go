package txn

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/storage"
)

// activeSet counts a client's transactions begun and not yet ended, by
// start_ts, in shards by start_ts: every transaction adds and removes
// itself, and one lock for all of them was where concurrent commits
// queued. A transaction active throughout a call of oldest is counted
// by it, as under one lock; one that begins or ends during the call may
// or may not be, as before or after a call under one lock.
type activeSet struct {
	shards [activeShards]activeShard
}

// activeShards is the number of activeSet's shards.
const activeShards = 32

type activeShard struct {
	mu sync.Mutex
	n  map[uint64]int
	_  [48]byte // a cache line of its own, padded past the mutex and the map
}

func (a *activeSet) shard(ts uint64) *activeShard { return &a.shards[ts%activeShards] }

func (a *activeSet) add(ts uint64) {
	s := a.shard(ts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[uint64]int{}
	}
	s.n[ts]++
}

func (a *activeSet) remove(ts uint64) {
	s := a.shard(ts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[ts]--; s.n[ts] <= 0 {
		delete(s.n, ts)
	}
}

// oldest returns the oldest start_ts of an active transaction.
func (a *activeSet) oldest() (uint64, bool) {
	var o uint64
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.Lock()
		for ts := range s.n {
			if o == 0 || ts < o {
				o = ts
			}
		}
		s.mu.Unlock()
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

// CollectorOptions shape RunCollector and CollectOnce.
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
	// Progress, if set, is told of a pass's progress after each batch of
	// rows: the rows visited so far and what they gave.
	Progress func(rows int, got Collected)
	// MayCollect, if set, says whether this process may propose and
	// collect now (one collector among many processes: the holder of an
	// advisory lock); while it says no, RunCollector only samples, so
	// that it can take over at once. Two collectors at once are safe,
	// only wasteful.
	MayCollect func(ctx context.Context) bool
	// Share, if set, is this process's share of each pass among the
	// processes that collect one store together: its index i among them
	// and their number n (0 <= i < n). A pass then visits only the rows
	// whose hash modulo n is i, resuming from a cursor of that share; a
	// process MayCollect does not let propose still collects its share
	// below the stored safe point, once it has known it for Delay. Read at
	// the start of each pass: shares that disagree (a membership change)
	// cost rows visited twice, or left to the next pass, never safety.
	Share func() (i, n int)
	// Delay is how long a new safe point waits, durable, before deletion
	// below it: longer than any reader caches an older one. 0 is the
	// default: none on a store this client owns alone (Indexed: its own
	// readers share the cache the collector raises), else CollectDelay;
	// negative is none (tests).
	Delay time.Duration
}

func (o *CollectorOptions) defaults(c *Client) {
	if o.Lifetime <= 0 {
		o.Lifetime = DefaultGCLifetime
	}
	if o.Interval <= 0 {
		o.Interval = min(max(o.Lifetime/10, 100*time.Millisecond), time.Minute)
	}
	if o.Oldest == nil {
		o.Oldest = func(context.Context) (uint64, bool, error) { ts, ok := c.OldestActive(); return ts, ok, nil }
	}
	if o.Delay == 0 {
		o.Delay = CollectDelay
		if c.Indexed() {
			o.Delay = -1
		}
	}
}

// CollectorPass is what one pass did (or, dry, would do).
type CollectorPass struct {
	SafePoint uint64
	Collected
	Rows     int // rows visited
	Skipped  int // rows left for a live lock
	Duration time.Duration
	DryRun   bool
	// Resumed: the pass finished one that a crash or a cancellation had
	// cut short, from its cursor, below the stored safe point.
	Resumed bool
}

type sample struct {
	ts uint64
	at time.Time // on the monotonic clock
}

// gcState is the collector's state in this process: its samples (in
// memory only), the safe point it last collected below, when it first
// knew the current safe point durable, and its counters.
type gcState struct {
	mu        sync.Mutex
	samples   []sample
	collected uint64    // the safe point the last complete pass ran at
	known     uint64    // the highest safe point known durable
	knownAt   time.Time // when it was first known durable
	knownAge  time.Time // when the sample it came from was taken, if ours
	pass      sync.Mutex

	passes, versions, bytes, skipped atomic.Uint64
	// uncompacted counts the versions removed since the last compaction.
	uncompacted atomic.Uint64
}

// compactAfter is how many versions the background collector removes
// before it compacts what they were removed from (and at least as many
// as the rows of a pass): a compaction rewrites the families' files.
const compactAfter = 10_000

// GCStats are the collector's counters in this process.
type GCStats struct {
	Passes, Versions, Bytes, Skipped uint64
	// SafePoint is the highest safe point this process knows durable;
	// SampledAt, if this process chose it, when the sample it came from
	// was taken (a safe point held back by an open transaction is older
	// still), else zero.
	SafePoint uint64
	SampledAt time.Time
}

// GCStats returns the collector's counters.
func (c *Client) GCStats() GCStats {
	g := &c.gc
	g.mu.Lock()
	sp, at := g.known, g.knownAge
	g.mu.Unlock()
	return GCStats{Passes: g.passes.Load(), Versions: g.versions.Load(), Bytes: g.bytes.Load(), Skipped: g.skipped.Load(),
		SafePoint: sp, SampledAt: at}
}

// sample takes a fresh oracle timestamp into the samples.
func (c *Client) sample(ctx context.Context) error {
	ts, err := c.oracle.Timestamp(ctx)
	if err != nil {
		return err
	}
	c.gc.mu.Lock()
	c.gc.samples = append(c.gc.samples, sample{ts: ts, at: time.Now()})
	c.gc.mu.Unlock()
	return nil
}

// eligible returns the newest sample at least lifetime old, dropping the
// older ones, or how long until the oldest will be.
func (c *Client) eligible(lifetime time.Duration) (sample, time.Duration, bool) {
	g := &c.gc
	g.mu.Lock()
	defer g.mu.Unlock()
	var got sample
	ok := false
	for len(g.samples) > 0 && time.Since(g.samples[0].at) >= lifetime {
		got, ok, g.samples = g.samples[0], true, g.samples[1:]
	}
	if ok {
		// Kept, so a later pass (or CollectOnce) may use it again.
		g.samples = append([]sample{got}, g.samples...)
		return got, 0, true
	}
	if len(g.samples) == 0 {
		return sample{}, lifetime, false
	}
	return sample{}, lifetime - time.Since(g.samples[0].at), false
}

// RunCollector runs the garbage collector until ctx ends (doc.go,
// "Garbage collection"): it samples a timestamp every Interval; a sample
// Lifetime old, held back to the oldest start_ts anyone needs, is
// proposed as the safe point; once a higher safe point is durable it waits
// Delay (longer than any client caches an older one) and collects the
// keyspace below it. Samples live in memory: after a restart nothing is
// collected for one Lifetime.
func (c *Client) RunCollector(ctx context.Context, o CollectorOptions) error {
	o.defaults(c)
	ctx = storage.WithReserve(ctx) // its writes free space (doc.go, "A nearly full disk")
	for {
		if err := c.sample(ctx); err != nil && ctx.Err() != nil {
			return nil
		}
		var p CollectorPass
		var err error
		switch s, _, ok := c.eligible(o.Lifetime); {
		case ok && (o.MayCollect == nil || o.MayCollect(ctx)):
			p, err = c.collectAt(ctx, o, s, false)
		case o.Share != nil:
			p, err = c.collectShare(ctx, o)
		default:
			p, _, err = c.resumeInterrupted(ctx, o, false)
		}
		if n := c.gc.uncompacted.Load(); err == nil && (n >= compactAfter && n >= uint64(p.Rows) || n > 0 && c.lowOnSpace()) {
			err = c.compact(ctx)
		}
		if err != nil && ctx.Err() == nil {
			c.opts.Logger.Warn("txn: garbage collection", "err", err)
		}
		if err := ctxwait.Sleep(ctx, o.Interval); err != nil {
			return nil
		}
	}
}

// CollectOnce runs one full pass of the collector and returns what it
// removed (dry: what it would remove, changing nothing). Its safe point
// is chosen as RunCollector's: the newest sample a Lifetime old, so
// without one taken a Lifetime ago in this process (by RunCollector or an
// earlier call) it samples and waits a Lifetime first.
func (c *Client) CollectOnce(ctx context.Context, o CollectorOptions, dry bool) (CollectorPass, error) {
	o.defaults(c)
	ctx = storage.WithReserve(ctx)
	if !dry {
		p, ok, err := c.resumeInterrupted(ctx, o, true)
		if ok || err != nil {
			if err == nil && c.gc.uncompacted.Load() > 0 {
				err = c.compact(ctx)
			}
			return p, err
		}
	}
	for {
		s, wait, ok := c.eligible(o.Lifetime)
		if ok {
			p, err := c.collectAt(ctx, o, s, dry)
			if err == nil && !dry && c.gc.uncompacted.Load() > 0 {
				err = c.compact(ctx)
			}
			return p, err
		}
		if wait == o.Lifetime {
			if err := c.sample(ctx); err != nil {
				return CollectorPass{}, err
			}
		}
		if err := ctxwait.Sleep(ctx, wait); err != nil {
			return CollectorPass{}, err
		}
	}
}

// collectAt proposes the sample s, held back to the oldest start_ts
// needed, as the safe point, and collects below the safe point once it is
// durable for Delay. A dry pass proposes nothing and counts what a pass
// below the higher of the proposal and the stored safe point would remove.
func (c *Client) collectAt(ctx context.Context, o CollectorOptions, s sample, dry bool) (CollectorPass, error) {
	g := &c.gc
	g.pass.Lock()
	defer g.pass.Unlock()
	cand := s.ts
	oldest, ok, err := o.Oldest(ctx)
	if err != nil {
		return CollectorPass{}, err
	}
	if ok && oldest <= cand {
		// Just below it: the transaction reads at its start_ts, and its
		// prewrites pass the fences (each below its start_ts).
		cand = oldest - 1
	}
	var sp uint64
	if dry {
		if sp, err = ReadSafePoint(ctx, c.store); err != nil {
			return CollectorPass{}, err
		}
		sp = max(sp, cand)
	} else {
		g.mu.Lock()
		done := cand <= g.collected
		g.mu.Unlock()
		if done {
			return CollectorPass{SafePoint: g.collected}, nil
		}
		sampled := time.Now().Add(-time.Since(s.at)) // the sample's wall time, for display
		if sp, err = advanceSafePoint(ctx, c.store, cand, sampled); err != nil {
			return CollectorPass{}, err
		}
		c.safePoints.raise(sp)
		g.mu.Lock()
		if sp > g.known {
			g.known, g.knownAt, g.knownAge = sp, time.Now(), time.Time{}
			if sp == cand {
				g.knownAge = s.at // held back, it is older still
			}
		}
		wait := o.Delay - time.Since(g.knownAt)
		done = sp <= g.collected
		g.mu.Unlock()
		if done {
			return CollectorPass{SafePoint: sp}, nil
		}
		if wait > 0 {
			if err := ctxwait.Sleep(ctx, wait); err != nil {
				return CollectorPass{}, err
			}
		}
	}
	return c.passBelow(ctx, o, sp, dry)
}

// collectShare collects this process's share (CollectorOptions.Share)
// below the stored safe point, another process's proposal, once this
// process has known it for Delay: it then no longer trusts a cached older
// one here, and neither does any process (the proposer waits as long).
func (c *Client) collectShare(ctx context.Context, o CollectorOptions) (CollectorPass, error) {
	g := &c.gc
	g.pass.Lock()
	defer g.pass.Unlock()
	sp, err := ReadSafePoint(ctx, c.store)
	if err != nil || sp == 0 {
		return CollectorPass{}, err
	}
	c.safePoints.raise(sp)
	if known, done := g.learn(sp); done || known < o.Delay {
		return CollectorPass{SafePoint: sp}, nil
	}
	return c.passBelow(ctx, o, sp, false)
}

// learn notes that the stored safe point sp is durable, and returns how
// long this process has known it and whether a complete pass of this
// process ran below it already.
func (g *gcState) learn(sp uint64) (known time.Duration, done bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if sp > g.known {
		g.known, g.knownAt, g.knownAge = sp, time.Now(), time.Time{}
	}
	return time.Since(g.knownAt), sp <= g.collected
}

// resumeInterrupted finishes a pass below the stored safe point that a
// crash or a cancellation cut short (its cursor is at that safe point),
// and says whether there was one; it changes nothing otherwise. The pass
// waits until this process has known the safe point for Delay (wait:
// sleeping; else it reports none yet and a later call resumes). So a
// process restarted after a crash, with no sample of its own for a
// Lifetime, first finishes what it left.
func (c *Client) resumeInterrupted(ctx context.Context, o CollectorOptions, wait bool) (CollectorPass, bool, error) {
	g := &c.gc
	g.pass.Lock()
	defer g.pass.Unlock()
	share, n := 0, 1
	if o.Share != nil {
		share, n = o.Share()
	}
	sp, err := ReadSafePoint(ctx, c.store)
	if err != nil || sp == 0 {
		return CollectorPass{}, false, err
	}
	cur, err := readCursor(ctx, c.store, cursorQualOf(share, n))
	if err != nil || cur.sp != sp || cur.next == nil {
		return CollectorPass{}, false, err
	}
	c.safePoints.raise(sp)
	known, done := g.learn(sp)
	left := o.Delay - known
	switch {
	case done:
		return CollectorPass{}, false, nil
	case left > 0 && !wait:
		return CollectorPass{}, false, nil
	case left > 0:
		if err := ctxwait.Sleep(ctx, left); err != nil {
			return CollectorPass{}, false, err
		}
	}
	p, err := c.passBelow(ctx, o, sp, false)
	p.Resumed = true
	return p, true, err
}

// passBelow runs a pass below the durable safe point sp (dry: counts what
// it would remove): of this process's share, resuming at its cursor.
// g.pass is held.
func (c *Client) passBelow(ctx context.Context, o CollectorOptions, sp uint64, dry bool) (CollectorPass, error) {
	g := &c.gc
	var err error
	share, n := 0, 1
	if o.Share != nil {
		share, n = o.Share()
	}
	var mine func(row []byte) bool
	curQual := cursorQualOf(share, n)
	if n > 1 {
		mine = func(row []byte) bool { return shareOf(row, n) == share }
	}
	start := time.Now()
	p := CollectorPass{SafePoint: sp, DryRun: dry}
	// A pass below sp that a crash or a cancellation interrupted resumes
	// at its cursor (the rows before it were collected below sp).
	var from []byte
	if !dry {
		if cur, err := readCursor(ctx, c.store, curQual); err == nil && cur.sp == sp {
			from = cur.next
		}
	}
	progress := func(rows int, got Collected, next []byte) {
		if !dry && next != nil {
			if err := saveCursor(ctx, c.store, curQual, sp, next); err != nil && ctx.Err() == nil {
				c.opts.Logger.Warn("txn: saving the garbage collector's cursor", "err", err)
			}
		}
		if o.Progress != nil {
			o.Progress(rows, got)
		}
	}
	if !dry {
		// Locks first: no commit record a lock's resolution needs goes
		// before the lock is resolved (doc.go, "Locks first").
		if err := c.resolveBelow(ctx, sp); err != nil {
			return p, fmt.Errorf("txn: garbage collection below %d: %w", sp, err)
		}
	}
	var next []byte
	p.Collected, p.Rows, p.Skipped, next, err = c.collectBelow(ctx, sp, from, dry, mine, progress)
	if !dry && err == nil && next == nil {
		err = clearCursor(ctx, c.store, curQual, sp)
	}
	p.Duration = time.Since(start)
	if !dry {
		g.passes.Add(1)
		g.versions.Add(uint64(p.Versions))
		g.bytes.Add(uint64(p.Bytes))
		g.skipped.Add(uint64(p.Skipped))
		g.uncompacted.Add(uint64(p.Versions))
		if err == nil && next == nil && p.Skipped == 0 {
			g.mu.Lock()
			g.collected = max(g.collected, sp)
			g.mu.Unlock()
		}
	}
	if o.Pass != nil {
		o.Pass(p)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return p, fmt.Errorf("txn: garbage collection below %d: %w", sp, err)
	}
	return p, err
}

// shareOf is the share, of n, a row belongs to (CollectorOptions.Share).
func shareOf(row []byte, n int) int {
	h := fnv.New32a()
	_, _ = h.Write(row)
	return int(h.Sum32() % uint32(n))
}

// lowOnSpace reports whether the store refuses writes for want of disk
// space (storage.Reserver): the collector then compacts after every pass
// that removed anything, so the space comes back.
func (c *Client) lowOnSpace() bool {
	r, ok := c.store.(storage.Reserver)
	return ok && r.LowOnSpace()
}

// compact compacts the families the collector removes from, on a store
// that keeps deletion markers until a compaction (storage.Compacter), so
// that their space comes back and scans stop stepping over them.
func (c *Client) compact(ctx context.Context) error {
	cp, ok := c.store.(storage.Compacter)
	if !ok {
		return nil
	}
	c.gc.uncompacted.Store(0)
	for _, fam := range []string{FamilyWrite, FamilyData} {
		if err := cp.CompactFamily(ctx, fam); err != nil {
			return fmt.Errorf("txn: compacting %s after garbage collection: %w", fam, err)
		}
	}
	return nil
}
