package observer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/coord"
)

// WorkerOptions configures Run.
type WorkerOptions struct {
	// Scanners is the number of scanner threads. 0 means 1.
	Scanners int
	// Batch is how many notified rows a scanner reads per scan call. 0
	// means 64.
	Batch int
	// MaxIdle bounds the back-off of a scanner that finds nothing. 0 means
	// 200ms.
	MaxIdle time.Duration
	// Drain makes Run return nil once a scan of the whole notify keyspace
	// finds nothing runnable (every notification processed, quarantined or
	// waiting on an observer this process lacks).
	Drain bool
	// CompactAfter is how many cleared notifications make the notify
	// keyspace worth compacting, on a store that keeps deletion markers
	// (storage.Compacter): a scanner compacts it at the end of a pass once
	// this many were cleared since the last compaction, so cleared
	// notifications stop costing scans. 0 means 1024; negative disables
	// compaction.
	CompactAfter int

	// Membership, when set, splits the notify keyspace among the workers
	// that share it (doc.go, "Partitioned finding"): Run registers this
	// worker in Group until it returns, and its scanners scan mostly its
	// own range. nil: every scanner scans the whole keyspace from random
	// places (the paper's scheme), as one worker alone should.
	Membership coord.Membership
	// Group is the membership group of the workers that split one notify
	// keyspace. "" means DefaultGroup; a group name holds no "/".
	Group string
	// FallbackEvery makes every FallbackEvery-th pass of a partitioned
	// scanner a pass over the whole keyspace from a random place, which
	// finds notifications no worker's range covers (workers whose samples
	// differ). 0 means 8; negative disables these (the full passes after
	// a member-list change and at the end of a drain remain).
	FallbackEvery int
	// Resample is how often a partitioned worker samples the notify
	// keyspace again and recomputes the bounds (it also does on every
	// member-list change), at multiples of Resample in wall time so that
	// the workers sample together. 0 means 10s.
	Resample time.Duration
}

func (o *WorkerOptions) ensureDefaults() {
	if o.Scanners <= 0 {
		o.Scanners = 1
	}
	if o.Batch <= 0 {
		o.Batch = 64
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = 200 * time.Millisecond
	}
	if o.CompactAfter == 0 {
		o.CompactAfter = 1024
	}
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	if o.FallbackEvery == 0 {
		o.FallbackEvery = 8
	}
	if o.Resample <= 0 {
		o.Resample = 10 * time.Second
	}
}

// Report is what a Run left behind.
type Report struct {
	// Unhandled lists, after a drain, the observers with pending
	// notifications that this process has no code for (registered by
	// another process, or by an earlier run of this program): their
	// notifications wait for a process that registers them.
	Unhandled []Unhandled
}

// Unhandled is an observer whose notifications a drain left pending.
type Unhandled struct {
	Observer, Column string
	Pending          int // notified cells of its column
}

// Run finishes any unfinished backfill, then runs scanner threads until
// ctx ends (then it returns ctx's error) or, with Drain, until no runnable
// notification is left; a drain reports (and logs) the observers whose
// pending notifications this process cannot run.
func (f *Framework) Run(ctx context.Context, opts WorkerOptions) (Report, error) {
	opts.ensureDefaults()
	if strings.Contains(opts.Group, "/") {
		return Report{}, fmt.Errorf("%w: worker group %q contains /", ErrInvalidArgument, opts.Group)
	}
	if err := f.ridingOut(ctx, "finishing backfills", func() error { return f.finishBackfills(ctx) }); err != nil {
		return Report{}, err
	}
	err := f.run(ctx, opts)
	if err != nil || !opts.Drain {
		return Report{}, err
	}
	var rep Report
	err = f.ridingOut(ctx, "listing what the drain left", func() error {
		var err error
		rep, err = f.unhandled(ctx)
		return err
	})
	return rep, err
}

// unhandled lists the observers without code here whose columns have
// pending notifications.
func (f *Framework) unhandled(ctx context.Context) (Report, error) {
	s, err := f.reg.refresh(ctx)
	if err != nil {
		return Report{}, err
	}
	backlog, _, err := f.backlog(ctx, nil)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	for col, cs := range backlog {
		for _, g := range s.byCol[col] {
			if g.fn == nil {
				rep.Unhandled = append(rep.Unhandled, Unhandled{Observer: g.name, Column: col, Pending: cs.Pending})
				f.opts.Logger.Warn("observer: notifications left pending for an observer this process did not register",
					"observer", g.name, "column", col, "pending", cs.Pending)
			}
		}
	}
	sort.Slice(rep.Unhandled, func(i, j int) bool { return rep.Unhandled[i].Observer < rep.Unhandled[j].Observer })
	return rep, nil
}

func (f *Framework) run(ctx context.Context, opts WorkerOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	var part *partitioner
	if opts.Membership != nil {
		var err error
		if part, err = f.startPartitioner(ctx, opts); err != nil {
			return err
		}
	}
	idle := newIdleTracker(opts.Scanners)
	for i := range opts.Scanners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &scanner{f: f, opts: opts, part: part, id: i, owner: fmt.Sprintf("%s/scanner-%d", f.client.Owner(), i), rng: rand.New(rand.NewPCG(rand.Uint64(), uint64(i)))}
			if err := s.run(ctx, idle); err != nil && ctx.Err() == nil {
				errOnce.Do(func() { runErr = err; cancel() })
			}
		}()
	}
	flusher := make(chan struct{})
	go func() { // counters reach the store while the worker runs
		defer close(flusher)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				// Not cut short by Drain's cancel: counts taken out of
				// memory must reach the store.
				f.flushStats(context.WithoutCancel(ctx))
			case <-ctx.Done():
				return
			}
		}
	}()
	if opts.Drain {
		go func() {
			select {
			case <-idle.allIdle:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	cancel()
	<-flusher
	if part != nil {
		part.stop(context.WithoutCancel(ctx))
	}
	f.flushStats(context.WithoutCancel(ctx))
	switch {
	case runErr != nil:
		return runErr
	case opts.Drain && idle.drained():
		return nil
	}
	return ctx.Err()
}

// idleTracker closes allIdle when every scanner has just completed a full
// pass that found nothing runnable, with no work done by any scanner
// since the first of those passes began.
type idleTracker struct {
	mu      sync.Mutex
	n       int
	epoch   uint64 // bumped whenever a scanner does work
	clean   map[int]uint64
	allIdle chan struct{}
	done    bool
}

func newIdleTracker(n int) *idleTracker {
	return &idleTracker{n: n, clean: map[int]uint64{}, allIdle: make(chan struct{})}
}

func (t *idleTracker) worked() {
	t.mu.Lock()
	t.epoch++
	clear(t.clean)
	t.mu.Unlock()
}

// passStart returns the epoch a pass starts in.
func (t *idleTracker) passStart() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.epoch
}

// idlePass records that scanner id found nothing in a pass begun at epoch.
func (t *idleTracker) idlePass(id int, epoch uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if epoch != t.epoch || t.done {
		return
	}
	t.clean[id] = epoch
	if len(t.clean) == t.n {
		t.done = true
		close(t.allIdle)
	}
}

func (t *idleTracker) drained() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}
