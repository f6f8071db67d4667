package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/workload"
)

// The gc figure: what the garbage collector holds a store to, what it
// costs the workload, and what it gives back to scans, each side by side
// in one run on stores of its own (gcstore.go):
//
//  1. Space: the bank on two stores at once for GCDuration, one with the
//     collector at a short lifetime and one without; each store's
//     versions and bytes at 1/5 of the run and at its end.
//  2. Cost: the two banks' commits per second over the same run, from
//     the 1/5 sample (the collector has run for a lifetime by then) to
//     the end.
//  3. Scans: a full scan of the accounts after GCVersions versions each
//     and one DB.GC pass, against the same scan of a fresh store of one
//     version each, alternating, the median of each.

const (
	gcAccounts = 1000
	// gcBatch is the accounts one transaction of the scans' load writes.
	gcBatch = 100
	// gcScanLifetime is the lifetime of the scans' stores: DB.GC samples
	// the oracle, then waits this long before its pass.
	gcScanLifetime = time.Second
	// gcScanRounds is the timed scans of each store, alternating.
	gcScanRounds = 9
)

func gcAccountRow(i int) string { return fmt.Sprintf("gcacct/%04d", i) }

// gcFigure measures and prints the three measurements.
func gcFigure(ctx context.Context, b *runner, r *Report) error {
	open, note := b.gcOpener()
	if note != "" {
		r.printf("%s", note)
	}
	lifetime := b.gcLifetime()
	on, off, err := b.gcSpace(ctx, open, lifetime)
	if err != nil {
		return err
	}
	printGCSpace(r, lifetime, b.opts.GCDuration, b.opts.Writers, on, off)
	printGCCost(r, b.opts.Writers, on, off, b.emulatorNote())
	if wrong := on.res.Wrong + off.res.Wrong; wrong > 0 {
		return fmt.Errorf("%w: %d wrong bank snapshots", ErrCheck, wrong)
	}
	sc, err := b.gcScans(ctx, open)
	if err != nil {
		return err
	}
	printGCScans(r, b.opts.GCVersions, sc)
	return nil
}

// gcLifetime is the space run's collector lifetime: GCLifetime, at most
// 1/5 of the run, so that by the first sample the store holds a lifetime
// of versions and the collector has begun.
func (b *runner) gcLifetime() time.Duration { return min(b.opts.GCLifetime, b.opts.GCDuration/5) }

// gcSide is one store of the space run, and what it measured there.
type gcSide struct {
	st          *gcStore
	early, late gcSample // at 1/5 of the run, and at its end
	res         workload.BankResult
	mark        bankPoint // the bank's progress at the early sample
	// mu guards last, the bank's latest progress.
	mu   sync.Mutex
	last bankPoint
}

// bankPoint is a bank's commits at a time since its transfers began.
type bankPoint struct {
	commits int64
	at      time.Duration
}

func (s *gcSide) progress(c workload.BankCounts, at time.Duration) {
	s.mu.Lock()
	s.last = bankPoint{commits: c.Commits, at: at}
	s.mu.Unlock()
}

// lateRate is the bank's commits per second from the early sample on.
func (s *gcSide) lateRate() float64 {
	return float64(s.res.Commits-s.mark.commits) / (s.res.Elapsed - s.mark.at).Seconds()
}

// gcSpace runs the bank on two new stores at once for GCDuration, one
// with the collector at lifetime and one without, samples both at 1/5 of
// the run, and each at the end of its bank.
func (b *runner) gcSpace(ctx context.Context, open gcOpener, lifetime time.Duration) (on, off *gcSide, err error) {
	on, off = &gcSide{}, &gcSide{}
	if on.st, err = open(ctx, "space-on", lifetime, true); err != nil {
		return nil, nil, err
	}
	defer on.st.close()
	if off.st, err = open(ctx, "space-off", lifetime, false); err != nil {
		return nil, nil, err
	}
	defer off.st.close()
	for _, s := range []*gcSide{on, off} {
		if err := openBank(ctx, s.st.db); err != nil {
			return nil, nil, err
		}
	}
	d := b.opts.GCDuration
	b.opts.Progress.Start("gc: the bank on two stores, with and without the collector: seconds", int64(d.Seconds()))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return b.runSide(gctx, on, d, func(at time.Duration) { b.opts.Progress.Set(min(int64(at.Seconds()), int64(d.Seconds()))) })
	})
	g.Go(func() error { return b.runSide(gctx, off, d, func(time.Duration) {}) })
	g.Go(func() error { return sampleEarly(gctx, d/5, on, off) })
	err = g.Wait()
	b.opts.Progress.End(err)
	return on, off, err
}

// openBank opens the bank's accounts, so that both stores' transfers
// start together: RunBank opens them unless they exist, and a run of no
// time does only that.
func openBank(ctx context.Context, db *percolator.DB) error {
	_, err := workload.RunBank(ctx, db, workload.BankOptions{Accounts: gcAccounts, Workers: 1, Duration: time.Nanosecond, Initial: 100})
	return err
}

// runSide runs the bank on a side's store for d, then samples the store.
func (b *runner) runSide(ctx context.Context, s *gcSide, d time.Duration, show func(time.Duration)) error {
	res, err := workload.RunBank(ctx, s.st.db, workload.BankOptions{Accounts: gcAccounts, Workers: b.opts.Writers, Readers: 2,
		Duration: d, Initial: 100, OnProgress: func(c workload.BankCounts, at time.Duration) { s.progress(c, at); show(at) }})
	if err != nil {
		return err
	}
	s.res = res
	s.late, err = s.st.sample(ctx)
	return err
}

// sampleEarly samples the sides at once, after a wait.
func sampleEarly(ctx context.Context, after time.Duration, sides ...*gcSide) error {
	if err := ctxwait.Sleep(ctx, after); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range sides {
		g.Go(func() error {
			s.mu.Lock()
			s.mark = s.last
			s.mu.Unlock()
			var err error
			s.early, err = s.st.sample(gctx)
			return err
		})
	}
	return g.Wait()
}

func printGCSpace(r *Report, lifetime, d time.Duration, writers int, on, off *gcSide) {
	// The verdict on bytes is on the versions' bytes (cellBytes): a
	// Pebble directory is mostly its write-ahead log at these rates (its
	// files recycled at the size they grew to) and its tables' size
	// depends on when the memtables were flushed and compacted, neither of
	// which is the history the store keeps. The directory is printed too.
	vr, br := show(ratio(on.late.versions, on.early.versions), 2), show(ratio(on.late.cellBytes, on.early.cellBytes), 2)
	bytesOf := func(s gcSample) string {
		if !on.st.withLog {
			return formatBytes(s.bytes)
		}
		return fmt.Sprintf("%s (log %s)", formatBytes(s.bytes), formatBytes(s.logBytes))
	}
	r.printf("gc space: bank (%s accounts, %d writers, %d wrong snapshots) on two stores at once; with the collector at lifetime %s: %s versions, %s at %s -> %s versions, %s at %s: %sx versions (target <= 1.5x: %s), %sx the versions' bytes (%s -> %s; target <= 1.5x: %s); without: %s -> %s versions (%.2fx), %s -> %s (%.2fx); bytes of the store's %s",
		group(gcAccounts), writers, on.res.Wrong+off.res.Wrong, lifetime,
		group(on.early.versions), bytesOf(on.early), d/5, group(on.late.versions), bytesOf(on.late), d,
		vr, r.mark("gc space: versions at the end <= 1.5x at 1/5 of the run", vr.atMost(1.5)),
		br, formatBytes(on.early.cellBytes), formatBytes(on.late.cellBytes), r.mark("gc space: bytes at the end <= 1.5x at 1/5 of the run", br.atMost(1.5)),
		group(off.early.versions), group(off.late.versions), ratio(off.late.versions, off.early.versions),
		bytesOf(off.early), bytesOf(off.late), ratio(off.late.bytes, off.early.bytes), on.st.sizeOf)
}

// printGCCost prints the cost line; note is what a rate's line adds
// (runner.emulatorNote).
func printGCCost(r *Report, writers int, on, off *gcSide, note string) {
	with, without := on.lateRate(), off.lateRate()
	x := show(with/without, 2)
	r.printf("gc cost:  %.0f commits/s with the collector vs %.0f without, the space run's two banks (%d writers each) from its 1/5 sample to the end: ratio %sx (target >= 0.9x: %s)%s",
		with, without, writers, x, r.mark("gc cost: bank with the collector >= 0.9x without", x.atLeast(0.9)), note)
}

// gcScanResult is what the scans measurement found.
type gcScanResult struct {
	pass percolator.GCResult
	// passErr is DB.GC's error after a pass that removed what it should
	// (its compaction, say, unfinished): printed, not the figure's.
	passErr error
	// left is the versions the pass left, fresh the versions of the
	// fresh store: the same when the pass left one version of each
	// account.
	left, fresh int64
	// The median scan times: of the store before its pass, after it, and
	// of the fresh store.
	before, collected, freshScan time.Duration
}

// gcScans writes GCVersions versions of every account to a new store, the
// newest alone to another, times scans of the first before and after one
// DB.GC pass, and of the second.
func (b *runner) gcScans(ctx context.Context, open gcOpener) (gcScanResult, error) {
	var res gcScanResult
	old, err := open(ctx, "scan-versions", gcScanLifetime, false)
	if err != nil {
		return res, err
	}
	defer old.close()
	fresh, err := open(ctx, "scan-fresh", gcScanLifetime, false)
	if err != nil {
		return res, err
	}
	defer fresh.close()
	n := b.opts.GCVersions
	if err := writeVersion(ctx, fresh.db, n-1); err != nil {
		return res, err
	}
	if err := b.writeVersions(ctx, old.db, n); err != nil {
		return res, err
	}
	return collectAndScan(ctx, old, fresh, strconv.Itoa(n-1))
}

// collectAndScan times scans of old before and after one DB.GC pass, and
// of fresh, alternating with old's after it; each scan finds want in
// every account. The pass must leave old holding what fresh holds.
func collectAndScan(ctx context.Context, old, fresh *gcStore, want string) (res gcScanResult, err error) {
	before, err := scanTimes(ctx, want, 3, old)
	if err != nil {
		return res, err
	}
	res.before = before[0]
	if err := waitNoneOpen(ctx, old.db); err != nil {
		return res, err
	}
	res.pass, res.passErr = old.db.GC(ctx)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if res.left, err = countVersions(ctx, old.raw); err != nil {
		return res, err
	}
	if res.fresh, err = countVersions(ctx, fresh.raw); err != nil {
		return res, err
	}
	switch {
	case res.left != res.fresh && res.passErr != nil:
		return res, res.passErr
	case res.left != res.fresh:
		return res, fmt.Errorf("%w: a pass with no transaction open left %d versions, the fresh store holds %d", ErrCheck, res.left, res.fresh)
	}
	after, err := scanTimes(ctx, want, gcScanRounds, old, fresh)
	if err != nil {
		return res, err
	}
	res.collected, res.freshScan = after[0], after[1]
	return res, nil
}

// waitNoneOpen waits, a minute at most, until no open transaction holds
// the safe point back (DB.GCStatus): a server's clients publish their
// oldest with their sessions' renewals, seconds apart, so a transaction
// that ended may hold it back until the next one.
func waitNoneOpen(ctx context.Context, db *percolator.DB) error {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := db.GCStatus(ctx)
		if err != nil || st.OldestOpen == 0 || time.Now().After(deadline) {
			return err
		}
		if err := ctxwait.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// writeVersions writes versions 0..n-1 of every account, one version at
// a time.
func (b *runner) writeVersions(ctx context.Context, db *percolator.DB, n int) error {
	b.opts.Progress.Start(fmt.Sprintf("gc: versions written of each of %d accounts", gcAccounts), int64(n))
	for v := range n {
		if err := writeVersion(ctx, db, v); err != nil {
			b.opts.Progress.End(err)
			return err
		}
		b.opts.Progress.Set(int64(v + 1))
	}
	b.opts.Progress.End(nil)
	return nil
}

// writeVersion writes v to every account, in transactions of gcBatch
// accounts committed concurrently.
func writeVersion(ctx context.Context, db *percolator.DB, v int) error {
	val := []byte(strconv.Itoa(v))
	return db.Load(ctx, gcAccounts/gcBatch, percolator.LoadOptions{Concurrency: gcAccounts / gcBatch}, func(tx *percolator.Txn, item int) error {
		for i := item * gcBatch; i < (item+1)*gcBatch; i++ {
			if err := tx.Set(gcAccountRow(i), "bal", val); err != nil {
				return err
			}
		}
		return nil
	})
}

// scanTimes times full scans of the accounts on each store, alternating
// between them, rounds of each after an untimed one each, and returns
// each store's median.
func scanTimes(ctx context.Context, want string, rounds int, stores ...*gcStore) ([]time.Duration, error) {
	times := make([][]time.Duration, len(stores))
	for round := -1; round < rounds; round++ {
		for i, s := range stores {
			d, err := scanAccounts(ctx, s.db, want)
			if err != nil {
				return nil, err
			}
			if round >= 0 {
				times[i] = append(times[i], d)
			}
		}
	}
	med := make([]time.Duration, len(stores))
	for i, t := range times {
		slices.Sort(t)
		med[i] = t[len(t)/2]
	}
	return med, nil
}

// scanAccounts times a read-only transaction's scan of the accounts, and
// checks that it found every one holding want.
func scanAccounts(ctx context.Context, db *percolator.DB, want string) (time.Duration, error) {
	var kvs []percolator.KV
	start := time.Now()
	err := db.View(ctx, func(tx *percolator.Txn) error {
		var err error
		kvs, err = tx.Scan(ctx, "gcacct/", "gcacct0", "bal", 0)
		return err
	})
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if len(kvs) != gcAccounts {
		return 0, fmt.Errorf("%w: a scan found %d accounts of %d", ErrCheck, len(kvs), gcAccounts)
	}
	for _, kv := range kvs {
		if string(kv.Value) != want {
			return 0, fmt.Errorf("%w: account %s holds %q, want %q", ErrCheck, kv.Row, kv.Value, want)
		}
	}
	return d, nil
}

func printGCScans(r *Report, versions int, sc gcScanResult) {
	x := show(sc.collected.Seconds()/sc.freshScan.Seconds(), 2)
	r.printf("gc scans: a full scan of %s accounts after %s versions each and one DB.GC pass (%s versions removed in %s, %s left): %s vs %s on a fresh store of one version each (median of %d, alternating): ratio %sx (target <= 1.2x: %s); before the pass %s (%.1fx)",
		group(gcAccounts), group(int64(versions)), group(int64(sc.pass.Versions)), ms(sc.pass.Duration), group(sc.left),
		durationText(sc.collected), durationText(sc.freshScan), gcScanRounds, x, r.mark("gc scans: after a pass <= 1.2x a fresh store", x.atMost(1.2)),
		durationText(sc.before), sc.before.Seconds()/sc.freshScan.Seconds())
	if sc.passErr != nil {
		r.Lines[len(r.Lines)-1] += fmt.Sprintf("; DB.GC returned an error after its pass: %v", sc.passErr)
	}
}

func ratio(a, b int64) float64 { return float64(a) / float64(b) }

// durationText prints a scan's time to the microsecond.
func durationText(d time.Duration) string { return d.Round(time.Microsecond).String() }

// formatBytes prints n in KiB or MiB.
func formatBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
