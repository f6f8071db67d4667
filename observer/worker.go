package observer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
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

// scanner is one scanner thread.
type scanner struct {
	f     *Framework
	opts  WorkerOptions
	part  *partitioner // nil without a Membership
	owner string
	rng   *rand.Rand
	id    int

	passes   int    // passes begun
	epoch    uint64 // Partition.epoch of its last pass
	wantFull bool   // the next pass covers the whole keyspace
}

// randomKey is a random position in the row space.
func (s *scanner) randomKey() []byte {
	return binary.BigEndian.AppendUint64(nil, s.rng.Uint64())
}

// run scans from a random position to the end of the keyspace (or of
// its worker's range) and around from its start, jumping to a new random
// position when it runs into a row another scanner holds (the paper's fix
// for scanners clumping like buses), and backing off when a whole pass
// finds nothing.
func (s *scanner) run(ctx context.Context, idle *idleTracker) error {
	wait, failWait, failing := time.Millisecond, outageFirstWait, false
	for ctx.Err() == nil {
		epoch := idle.passStart()
		spans, full := s.plan()
		worked, pending, err := s.pass(ctx, spans, idle)
		switch {
		case err != nil && (fatal(err) || ctx.Err() != nil):
			return err
		case err != nil: // an outage (outage.go): back off and scan again
			if failing {
				s.f.outageFailedAgain()
			} else {
				s.f.outageBegan(err)
			}
			failing = true
			if !retryPass(ctx, &failWait) {
				return nil
			}
			continue
		case failing:
			s.f.outageEnded()
			failing, failWait = false, outageFirstWait
		}
		s.f.maybeCompact(ctx, s.opts)
		// A drain ends only after a pass over the whole keyspace found
		// nothing: one over a range leaves the rest unchecked.
		s.wantFull = s.opts.Drain && !full && !worked && !pending
		if worked {
			wait = time.Millisecond
			continue
		}
		if !pending && full {
			idle.idlePass(s.id, epoch)
		}
		if err := txn.SleepContext(ctx, wait); err != nil {
			return nil
		}
		wait = min(2*wait, s.opts.MaxIdle)
	}
	return nil
}

// plan chooses the next pass: over the worker's range when partitioned,
// else — and on a member-list change, every FallbackEvery-th pass, and at
// a drain's end — over the whole keyspace (full). Both begin at a random
// place and wrap around.
func (s *scanner) plan() (spans [][2][]byte, full bool) {
	s.passes++
	p := s.part.current()
	switch {
	case p == nil || p.Self < 0:
	case p.epoch != s.epoch: // the others may still scan the old ranges
		s.epoch = p.epoch
	case s.wantFull:
	case s.opts.FallbackEvery > 0 && s.passes%s.opts.FallbackEvery == 0:
	default:
		start, end := p.Range(p.Self)
		s.f.rangePasses.Add(1)
		s.f.stats.add("", statRangePasses, 1)
		return around(p.origin(s.rng, p.Self), start, end), false
	}
	s.f.fullPasses.Add(1)
	s.f.stats.add("", statFullPasses, 1)
	return around(s.randomKey(), nil, nil), true
}

// pass scans spans in order once, or until it jumps. worked reports that
// it ran an observer or cleared a notification; pending, that it left
// runnable work (a failed run waiting to be retried, a row another
// scanner held).
func (s *scanner) pass(ctx context.Context, spans [][2][]byte, idle *idleTracker) (worked, pending bool, err error) {
	for _, span := range spans {
		pos, end := span[0], span[1]
		for {
			rows, err := s.f.scanNotify(ctx, pos, end, s.opts.Batch)
			var set *regSet
			if err == nil {
				// After the scan: a registration whose backfill wrote any
				// notification the scan returned shows here (the version is
				// raised before the backfill), so no notification is
				// cleared for an observer this process does not know.
				set, err = s.f.reg.refresh(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return worked, true, nil
				}
				return worked, true, fmt.Errorf("observer: scanning notifications: %w", err)
			}
			for _, r := range rows {
				did, left, jump, err := s.row(ctx, r, set)
				if err != nil {
					return worked, true, err
				}
				if did {
					worked = true
					idle.worked()
				}
				pending = pending || left
				if jump {
					s.f.stats.add("", statJumps, 1)
					return worked, true, nil
				}
			}
			if len(rows) < s.opts.Batch {
				break
			}
			pos = append(bytes.Clone(rows[len(rows)-1].Key), 0)
		}
	}
	return worked, pending, nil
}

// notified is a data row and its notifications.
type notified struct {
	Key []byte
	ns  []txn.Notification
}

// scanNotify reads up to limit notified rows of [start, end), reading the
// notify keyspace only, and counts what finding them cost.
func (f *Framework) scanNotify(ctx context.Context, start, end []byte, limit int) ([]notified, error) {
	var rows []notified
	collect := func(row []byte, ns []txn.Notification) bool {
		rows = append(rows, notified{row, ns})
		return true
	}
	began := time.Now()
	visited, err := f.notify.Scan(ctx, start, end, limit, collect)
	f.stats.add("", statScanKeys, int64(visited))
	f.stats.add("", statScans, 1)
	f.stats.add("", statScanRows, int64(len(rows)))
	f.stats.add("", statScanMicros, time.Since(began).Microseconds())
	return rows, err
}

// maybeCompact compacts the notify keyspace, on a store that keeps
// deletion markers, once enough notifications were cleared since the last
// compaction (WorkerOptions.CompactAfter). One scanner compacts at a time;
// the others go on scanning. A failed compaction is logged, not fatal:
// it costs only scan time.
func (f *Framework) maybeCompact(ctx context.Context, opts WorkerOptions) {
	if !f.notify.Compactable() || opts.CompactAfter < 0 {
		return
	}
	n := f.clears.Load()
	if n < int64(opts.CompactAfter) || !f.compacting.CompareAndSwap(false, true) {
		return
	}
	defer f.compacting.Store(false)
	f.clears.Add(-n)
	if _, err := f.notify.Compact(ctx); err != nil {
		if ctx.Err() == nil {
			f.opts.Logger.Warn("observer: compacting the notify keyspace", "err", err)
		}
		f.clears.Add(n) // try again later
		return
	}
	f.stats.add("", statCompactions, 1)
}

// row processes the notifications of one row under the advisory lock,
// with the registry set: columns whose observers all have code here run
// them; columns no observer watches any more are cleared; the others are
// left for a process that has their code. left reports runnable work left
// behind; jump, that another scanner holds the row.
func (s *scanner) row(ctx context.Context, r notified, set *regSet) (did, left, jump bool, err error) {
	cols := set.byCol
	runnable := false
	for _, n := range r.ns {
		if regs := cols[n.Column]; len(regs) == 0 || hasCode(regs) {
			runnable = true
			break
		}
	}
	if !runnable {
		return false, false, false, nil
	}
	unlock, held, err := s.f.locker.TryLock(ctx, string(r.Key), s.owner)
	if err != nil {
		return false, true, false, err
	}
	if held {
		return false, true, true, nil
	}
	defer unlock()
	byCol := map[string][]uint64{}
	ahead := map[string][]uint64{} // versions written ahead of their prewrite
	var order []string
	for _, n := range r.ns {
		if _, ok := byCol[n.Column]; !ok {
			order = append(order, n.Column)
		}
		byCol[n.Column] = append(byCol[n.Column], n.TS)
		if n.Ahead {
			ahead[n.Column] = append(ahead[n.Column], n.TS)
		}
	}
	for _, col := range order {
		regs := cols[col]
		if len(regs) > 0 && !hasCode(regs) {
			continue
		}
		d, l, err := s.f.cell(ctx, r.Key, col, regs, byCol[col], ahead[col])
		if err != nil {
			return did, true, false, err
		}
		did, left = did || d, left || l
	}
	return did, left, false, nil
}

func hasCode(regs []*registration) bool {
	for _, g := range regs {
		if g.fn == nil {
			return false
		}
	}
	return true
}

// cell runs every observer of (row, col) that the change makes dirty, and
// clears the notification versions seen once all are done. did reports
// that it ran an observer or cleared something; left, that work remains.
func (f *Framework) cell(ctx context.Context, key []byte, col string, regs []*registration, seen, ahead []uint64) (did, left bool, err error) {
	row := string(key)
	if len(regs) == 0 {
		return f.clearOrphans(ctx, key, col, seen)
	}
	done, durable := true, false
	minStart := uint64(0)
	for _, g := range regs {
		if f.fails.waiting(row, col, g.name) {
			done = false
			continue
		}
		start, ok, ran, quarantined, err := f.runOne(ctx, row, col, g)
		if err != nil {
			return did, true, err
		}
		did = did || ran
		durable = durable || quarantined
		if minStart == 0 || start < minStart {
			minStart = start
		}
		done = done && ok
	}
	if !done {
		return did, true, nil
	}
	cleared, err := f.clear(ctx, key, col, seen, ahead, minStart, durable)
	return did || cleared, !cleared, err
}

// runOne runs g on (row, col) in its own transaction, whose start_ts is
// start. ok reports that g needs nothing more for this change (it
// committed, found the cell clean, or was quarantined); ran, that g's
// code ran; quarantined, that this run quarantined the notification. An
// error that a later run would meet again (a corrupt record, an observer
// that ends its own transaction) is a failure of g on this cell, counted
// towards quarantine like an error g returns.
func (f *Framework) runOne(ctx context.Context, row, col string, g *registration) (start uint64, ok, ran, quarantined bool, err error) {
	tx, err := f.client.Begin(ctx)
	if err != nil {
		return 0, false, false, false, err
	}
	start = tx.StartTS()
	txn.Manage(tx)
	ack := AckColumn(g.name, col)
	if !g.weak {
		dirty, err := f.dirty(ctx, tx, row, col, ack)
		if err != nil || !dirty {
			_ = txn.RollbackManaged(ctx, tx)
			if err == nil || transient(err) != nil {
				return start, err == nil, false, false, transient(err)
			}
			q, err := f.failed(ctx, row, col, g, fmt.Errorf("observer: checking whether the cell changed: %w", err))
			return start, q, false, q, err
		}
	}
	f.stats.add(g.name, statRuns, 1)
	if err := call(ctx, g.fn, tx, row, col); err != nil {
		_ = txn.RollbackManaged(ctx, tx)
		if errors.Is(err, txn.ErrConflict) {
			f.stats.add(g.name, statConflicts, 1)
			return start, false, true, false, nil
		}
		if unreachable(err) { // the store's failure, not the observer's
			return start, false, true, false, err
		}
		q, err := f.failed(ctx, row, col, g, err)
		return start, q, true, q, err
	}
	if !g.weak {
		if err := txn.SetReserved(tx, row, ack, binary.BigEndian.AppendUint64(nil, start)); err != nil {
			_ = txn.RollbackManaged(ctx, tx)
			q, err := f.failed(ctx, row, col, g, err)
			return start, q, true, q, err
		}
	}
	self := txn.Writes(tx, row, col)
	if self && f.loops.count(row, col, g.name)+1 >= selfTriggerLimit {
		_ = txn.RollbackManaged(ctx, tx)
		return start, true, true, true, f.stopLoop(ctx, row, col, g)
	}
	switch err := txn.CommitManaged(ctx, tx); {
	case err == nil:
		f.stats.add(g.name, statCommits, 1)
		f.fails.reset(row, col, g.name)
		f.countSelfTrigger(row, col, g, self)
		return start, true, true, false, nil
	case errors.Is(err, txn.ErrConflict):
		// Another run of this change won the ack, or the observer's
		// writes lost a race: the notification stays for a later run.
		f.stats.add(g.name, statConflicts, 1)
		return start, false, true, false, nil
	case transient(err) != nil:
		return start, false, true, false, err
	default:
		q, err := f.failed(ctx, row, col, g, fmt.Errorf("observer: commit failed: %w", err))
		return start, q, true, q, err
	}
}

// selfTriggerLimit is how many runs in a row of an observer that each
// write the cell it observes make a loop: each such commit is a new change
// of the cell, so the observer runs again, forever unless it stops
// writing (an observer that normalizes a value writes once more, then
// finds nothing to change).
const selfTriggerLimit = 8

// countSelfTrigger counts a committed run that wrote its own observed
// cell (self); a run that did not resets the count.
func (f *Framework) countSelfTrigger(row, col string, g *registration, self bool) {
	if !self {
		f.loops.reset(row, col, g.name)
		return
	}
	f.stats.add(g.name, statSelfTriggers, 1)
	f.loops.record(row, col, g.name, 0)
}

// stopLoop quarantines the notification of a run that would have been the
// selfTriggerLimit-th in a row to write the cell it observes; the run was
// rolled back, so the notification can be cleared.
func (f *Framework) stopLoop(ctx context.Context, row, col string, g *registration) error {
	f.stats.add(g.name, statSelfTriggers, 1)
	f.loops.reset(row, col, g.name)
	f.opts.Logger.Error("observer: writes the cell it observes on every run (a loop)", "observer", g.name, "row", row, "column", col)
	return f.quarantine(ctx, row, col, g, selfTriggerLimit,
		fmt.Errorf("observer %q wrote the cell it observes (%q/%s) in %d runs in a row: a self-trigger loop", g.name, row, col, selfTriggerLimit))
}

// transient returns the errors that are not the observer's failure —
// the run's context ended, the store closed or could not be reached, a
// commit whose outcome could not be learned — and nil for the others,
// which count against the observer (MaxFailures quarantines). The errors
// it returns end the scanner's pass, which backs off and scans again
// (outage.go): the notification stays, and no failure is counted.
func transient(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, storage.ErrClosed) || unreachable(err) {
		return err
	}
	return nil
}

// unreachable reports whether err says the store, the oracle or the
// coordination service could not be reached, or a commit's outcome could
// not be learned.
func unreachable(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, txn.ErrCommitUnknown)
}

// dirty reports whether (row, col)'s newest commit in tx's snapshot is
// newer than the observer's ack (invariant 3).
func (f *Framework) dirty(ctx context.Context, tx *txn.Txn, row, col, ack string) (bool, error) {
	latest, err := txn.CommitTS(ctx, tx, row, col)
	if err != nil || latest == 0 {
		return false, err
	}
	v, err := txn.GetReserved(ctx, tx, row, ack)
	switch {
	case errors.Is(err, txn.ErrNotFound):
		return true, nil
	case err != nil:
		return false, err
	case len(v) != 8:
		return true, nil
	}
	return latest > binary.BigEndian.Uint64(v), nil
}

// call runs fn, turning a panic into an error.
func call(ctx context.Context, fn Func, tx *txn.Txn, row, col string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("observer panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx, tx, row, col)
}

// clear deletes the notification versions seen of (row, col) unless a
// write the runs begun at minStart may not have seen exists
// (txn.NotifySpace.Clear: never a newer notification, never hiding a
// newer write; on a store that keeps notifications apart it fences the
// prewrites of the versions ahead that have not landed).
func (f *Framework) clear(ctx context.Context, row []byte, col string, seen, ahead []uint64, minStart uint64, durable bool) (bool, error) {
	cleared, err := f.notify.Clear(ctx, row, col, seen, ahead, minStart, durable)
	if err != nil {
		return false, transient(err)
	}
	if cleared {
		f.clears.Add(int64(len(seen)))
	}
	return cleared, nil
}

// clearOrphans deletes the notification versions seen of a column that no
// observer watches any more (every process's registry says so after the
// refresh that followed the scan; a registration raised later backfills
// with a version of its own, which this delete leaves).
func (f *Framework) clearOrphans(ctx context.Context, row []byte, col string, seen []uint64) (did, left bool, err error) {
	if err := f.notify.Delete(ctx, row, col, seen); err != nil {
		return false, true, transient(err)
	}
	f.clears.Add(int64(len(seen)))
	return true, false, nil
}
