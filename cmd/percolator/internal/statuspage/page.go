package statuspage

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator"
)

// Snapshot is what a process knows at one moment. A nil section is one
// the process cannot fill; the page says so rather than show zeros.
type Snapshot struct {
	// Observers is the notification backlog, the observers' counters
	// and the partitions the workers published; nil when the process
	// does not read them, with ObserversErr set when it tried and failed.
	Observers    *percolator.ObserverStatus
	ObserversErr error
	// Server is a server's own figures (serve).
	Server *Server
	// Oracle is who hands out timestamps, as far as the process knows.
	Oracle *Oracle
	// Store is the store's size on disk, where the process can see it.
	Store *Store
}

// Server is what a server knows of its clients, from its metrics.
type Server struct {
	Sessions, Locks int     // live liveness sessions, advisory locks held
	Requests        float64 // RPCs served since start
	// GCLag is how far back snapshots stay readable (the safe point's
	// age); 0 when the collector has not run.
	GCLag time.Duration
}

// Oracle is who hands out timestamps.
type Oracle struct {
	// Leader says who leads, in words ("this server", "this candidate").
	Leader string
	// Standby is set on an oracle candidate that does not lead now.
	Standby bool
}

// Store is the store as its process sees it on disk.
type Store struct {
	Dir   string
	Bytes int64
}

// Options configures New.
type Options struct {
	// Process names the process in the page's title ("serve", "worker",
	// "oracle"); About says what it runs on. Process is required.
	Process, About string
	// Read returns what the process knows now; required. It is called
	// from Run's goroutine only (or Sample's caller), with a context that
	// ends within 30s (or an Interval, if longer).
	Read func(ctx context.Context) Snapshot
	// Interval between samples; default 5s. The page refreshes itself at
	// this interval, or every 5s if that is longer.
	Interval time.Duration
	// Window is how far back the charts reach; default 1h.
	Window time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// EnsureDefaults fills in the zero fields that have defaults.
func (o *Options) EnsureDefaults() {
	if o.Interval == 0 {
		o.Interval = 5 * time.Second
	}
	if o.Window == 0 {
		o.Window = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate checks o, after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case o.Process == "" || o.Read == nil:
		return errors.New("statuspage: Process and Read are required")
	case o.Interval < 0 || o.Window < o.Interval:
		return errors.New("statuspage: Interval must be positive and Window at least Interval")
	}
	return nil
}

// point is one sample's figures for the charts; NaN where unknown.
// Runs, Failures and Requests are cumulative counters.
type point struct {
	at                                 time.Time
	backlog, lag, runs, failures, reqs float64
	sessions, storeBytes               float64
}

// Page samples a process's state and serves it as HTML. ServeHTTP is
// safe concurrently with Run and with itself.
type Page struct {
	opts Options
	wake chan struct{} // Wake's signal to Run, buffered 1
	mu   struct {
		sync.Mutex
		last   Snapshot
		lastAt time.Time // zero before the first sample
		prev   Snapshot  // the sample before last, for rates
		prevAt time.Time
		ring   []point // Invariant: len <= cap; oldest at start once full
		start  int
	}
}

// New returns a Page; call Run to start sampling.
func New(opts Options) (*Page, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := &Page{opts: opts, wake: make(chan struct{}, 1)}
	p.mu.ring = make([]point, 0, int(opts.Window/opts.Interval)+1)
	return p, nil
}

// Run samples until ctx ends: the first at once, each next one an
// Interval after the last ended (so a slow read, a large backlog's scan,
// keeps the process busy half the time at most), or at Wake.
func (p *Page) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
		}
		p.Sample(ctx)
		t.Reset(p.opts.Interval)
	}
}

// Wake makes Run sample now rather than at the next tick: the process's
// state just changed. Safe to call from any goroutine; never blocks.
func (p *Page) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// readTimeout bounds a Read: a store that does not answer shows as an
// error on the page, not as a page that stopped.
const readTimeout = 30 * time.Second

// Sample reads the process's state once and records it.
func (p *Page) Sample(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, max(readTimeout, p.opts.Interval))
	snap := p.opts.Read(rctx)
	cancel()
	if ctx.Err() != nil {
		return // the process is stopping: what the read saw is not the state
	}
	p.record(p.opts.Now(), snap)
}

func (p *Page) record(at time.Time, snap Snapshot) {
	pt := pointOf(at, snap)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.prev, p.mu.prevAt = p.mu.last, p.mu.lastAt
	p.mu.last, p.mu.lastAt = snap, at
	if r := p.mu.ring; len(r) < cap(r) {
		p.mu.ring = append(r, pt)
		return
	}
	p.mu.ring[p.mu.start] = pt
	p.mu.start = (p.mu.start + 1) % len(p.mu.ring)
}

// history returns the samples oldest first, and the last snapshot.
func (p *Page) history() ([]point, Snapshot, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.mu.ring
	out := make([]point, 0, len(r))
	out = append(out, r[p.mu.start:]...)
	out = append(out, r[:p.mu.start]...)
	return out, p.mu.last, p.mu.lastAt
}

// previous returns the sample before the last one.
func (p *Page) previous() (Snapshot, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.prev, p.mu.prevAt
}

func pointOf(at time.Time, s Snapshot) point {
	nan := math.NaN()
	pt := point{at: at, backlog: nan, lag: nan, runs: nan, failures: nan, reqs: nan, sessions: nan, storeBytes: nan}
	if o := s.Observers; o != nil {
		pt.backlog, pt.lag = 0, 0
		for _, c := range o.Columns {
			pt.backlog += float64(c.Pending)
			pt.lag = max(pt.lag, c.Oldest.Seconds())
		}
		pt.runs, pt.failures = 0, 0
		for _, ob := range o.Observers {
			pt.runs += float64(ob.Counts["runs"])
			pt.failures += float64(ob.Counts["failures"])
		}
	}
	if s.Server != nil {
		pt.sessions, pt.reqs = float64(s.Server.Sessions), s.Server.Requests
	}
	if s.Store != nil {
		pt.storeBytes = float64(s.Store.Bytes)
	}
	return pt
}
