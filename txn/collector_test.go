package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRunCollector: the collector proposes samples once they are a
// lifetime old, held back by the oldest transaction still open, so that
// transaction reads its snapshot whole; once it ends, the safe point moves
// past it and its versions go.
func TestRunCollector(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	for _, v := range []string{"1", "2", "3"} {
		commitValue(t, e, "w", "r", "v", v)
	}
	c := e.client("gc")
	c.opts.safePointCache = -1 // no CollectDelay in this test: every check reads it
	long, _ := c.Begin(ctx)    // open across the collections
	commitValue(t, e, "w", "r", "v", "4")
	commitValue(t, e, "w", "r", "v", "5")

	var mu sync.Mutex
	var passes []CollectorPass
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.RunCollector(cctx, CollectorOptions{Lifetime: 50 * time.Millisecond, Interval: 10 * time.Millisecond, Delay: -1,
			Pass: func(p CollectorPass) { mu.Lock(); passes = append(passes, p); mu.Unlock() }})
	}()
	waitFor := func(what string, ok func([]CollectorPass) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			got := ok(passes)
			mu.Unlock()
			if got {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pass %s: %+v", what, passes)
			}
		}
	}
	waitFor("up to the open transaction", func(ps []CollectorPass) bool { return len(ps) > 0 && ps[len(ps)-1].SafePoint == long.StartTS()-1 })
	if v, err := long.Get(ctx, "r", "v"); err != nil || string(v) != "3" {
		t.Fatalf("the open transaction reads %q, %v; want 3", v, err)
	}
	if err := long.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("past the ended transaction", func(ps []CollectorPass) bool { return ps[len(ps)-1].SafePoint > long.StartTS() })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(versions(t, e, "r", FamilyWrite)); n != 1 {
		t.Fatalf("%d write records left, want the newest only", n)
	}
	now, _ := c.Begin(ctx)
	if v, err := now.Get(ctx, "r", "v"); err != nil || string(v) != "5" {
		t.Fatalf("after collection a new transaction reads %q, %v; want 5", v, err)
	}
}

// TestCollectOnce: a dry pass counts what a pass removes and changes
// nothing (not even the safe point); the pass then removes exactly that;
// a pass waits for a sample a lifetime old first.
func TestCollectOnce(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	for _, v := range []string{"1", "2", "3"} {
		commitValue(t, e, "w", "r", "v", v)
	}
	c := e.client("gc")
	c.opts.safePointCache = -1
	o := CollectorOptions{Lifetime: 30 * time.Millisecond, Delay: -1}
	began := time.Now()
	dry, err := c.CollectOnce(ctx, o, true)
	if err != nil || !dry.DryRun || dry.Versions != 4 || dry.Rows != 1 {
		t.Fatalf("dry pass: %+v, %v; want 4 versions (2 write records, their data) in 1 row", dry, err)
	}
	if time.Since(began) < o.Lifetime {
		t.Fatal("the first pass did not wait for a sample a lifetime old")
	}
	if sp, _ := ReadSafePoint(ctx, e.store); sp != 0 {
		t.Fatalf("a dry pass moved the safe point to %d", sp)
	}
	if n := len(versions(t, e, "r", FamilyWrite)); n != 3 {
		t.Fatalf("a dry pass left %d write records, want 3", n)
	}
	p, err := c.CollectOnce(ctx, o, false)
	if err != nil || p.Versions != dry.Versions || p.SafePoint < dry.SafePoint {
		t.Fatalf("pass: %+v, %v; want what the dry pass counted", p, err)
	}
	if n := len(versions(t, e, "r", FamilyWrite)); n != 1 {
		t.Fatalf("%d write records left, want 1", n)
	}
	if s := c.GCStats(); s.Passes != 1 || s.Versions != 4 || s.SafePoint != p.SafePoint {
		t.Fatalf("stats %+v", s)
	}
}

// TestPausedBeforeRegistration: a transaction paused between its start
// timestamp and its registration for longer than the lifetime is not
// waited for (registration is for progress): the collector passes it and
// removes what its snapshot reads, and its read fails with
// ErrSnapshotTooOld rather than return a version other than the one it
// must read.
func TestPausedBeforeRegistration(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	commitValue(t, e, "w", "r", "v", "1")
	c := e.client("c")
	paused, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.opts.afterStartTS = func() { once.Do(func() { close(paused); <-release }) }
	type began struct {
		tx  *Txn
		err error
	}
	got := make(chan began, 1)
	go func() { tx, err := c.Begin(ctx); got <- began{tx, err} }()
	<-paused
	commitValue(t, e, "w", "r", "v", "2")
	commitValue(t, e, "w", "r", "v", "3")
	p, err := c.CollectOnce(ctx, CollectorOptions{Lifetime: 30 * time.Millisecond, Delay: -1}, false)
	if err != nil || p.Versions == 0 {
		t.Fatalf("pass: %+v, %v", p, err)
	}
	close(release)
	b := <-got
	if b.err != nil {
		t.Fatal(b.err)
	}
	if b.tx.StartTS() >= p.SafePoint {
		t.Fatalf("start_ts %d not below the safe point %d", b.tx.StartTS(), p.SafePoint)
	}
	if v, err := b.tx.Get(ctx, "r", "v"); !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("the paused transaction read %q, %v; want ErrSnapshotTooOld", v, err)
	}
}

// writeRows commits each of values, in order, to column v of rows rows
// r000, r001, ..., one transaction per value.
func writeRows(t *testing.T, e *env, rows int, values ...string) {
	t.Helper()
	ctx := context.Background()
	for _, v := range values {
		tx, _ := e.client("w").Begin(ctx)
		for i := range rows {
			_ = tx.Set(fmt.Sprintf("r%03d", i), "v", []byte(v))
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollectResumes: a pass cut short (its context ended, as a crash
// would end it) leaves a cursor; the next pass below the same safe point
// resumes there rather than start over, and finishes the keyspace.
func TestCollectResumes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	const rows = 600
	writeRows(t, e, rows, "1", "2")
	c := e.client("gc")
	c.opts.safePointCache = -1
	o := CollectorOptions{Lifetime: 10 * time.Millisecond, Delay: -1}
	dry, err := c.CollectOnce(ctx, o, true)
	if err != nil || dry.Rows != rows {
		t.Fatalf("dry pass: %+v, %v", dry, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	o.Progress = func(int, Collected) { cancel() }
	cut, err := c.CollectOnce(cctx, o, false)
	if !errors.Is(err, context.Canceled) || cut.Rows == 0 || cut.Rows >= rows {
		t.Fatalf("the cut pass: %+v, %v", cut, err)
	}
	cur, err := readCursor(ctx, e.store, cursorQual)
	if err != nil || cur.sp != cut.SafePoint || cur.next == nil {
		t.Fatalf("cursor %+v, %v; want one at safe point %d", cur, err, cut.SafePoint)
	}
	o.Progress = nil
	rest, err := c.CollectOnce(ctx, o, false)
	if err != nil || !rest.Resumed || rest.SafePoint != cut.SafePoint || rest.Rows+cut.Rows != rows || rest.Versions+cut.Versions != dry.Versions {
		t.Fatalf("the resumed pass: %+v after %+v, %v; want the %d rows' %d old versions between them", rest, cut, err, rows, dry.Versions)
	}
	if cur, _ := readCursor(ctx, e.store, cursorQual); cur.next != nil {
		t.Fatalf("a finished pass left its cursor: %+v", cur)
	}
}

// TestCollectShares: processes that split a pass (CollectorOptions.Share)
// each remove the old versions of their own share of the rows only; a
// share's pass cut short resumes from that share's cursor; between them
// the shares remove what one pass over every row would.
func TestCollectShares(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	const rows = 600
	writeRows(t, e, rows, "1", "2")
	a, b := e.client("a"), e.client("b")
	a.opts.safePointCache, b.opts.safePointCache = -1, -1
	o := CollectorOptions{Lifetime: 10 * time.Millisecond, Delay: -1}
	dry, err := a.CollectOnce(ctx, o, true)
	if err != nil || dry.Versions == 0 {
		t.Fatalf("dry pass: %+v, %v", dry, err)
	}
	oa := o
	oa.Share = func() (int, int) { return 0, 2 }
	pa, err := a.CollectOnce(ctx, oa, false)
	if err != nil || pa.Versions == 0 || pa.Versions >= dry.Versions {
		t.Fatalf("share 0 of 2: %+v, %v; want some of the %d old versions", pa, err, dry.Versions)
	}
	ob := o
	ob.Share = func() (int, int) { return 1, 2 }
	cctx, cancel := context.WithCancel(ctx)
	ob.Progress = func(int, Collected) { cancel() }
	cut, err := b.CollectOnce(cctx, ob, false)
	if !errors.Is(err, context.Canceled) || cut.Rows >= rows {
		t.Fatalf("the cut pass of share 1: %+v, %v", cut, err)
	}
	if cur, err := readCursor(ctx, e.store, cursorQualOf(1, 2)); err != nil || cur.sp != cut.SafePoint || cur.next == nil {
		t.Fatalf("share 1's cursor %+v, %v; want one at safe point %d", cur, err, cut.SafePoint)
	}
	if cur, _ := readCursor(ctx, e.store, cursorQual); cur.next != nil {
		t.Fatalf("a share's pass left the whole pass's cursor: %+v", cur)
	}
	ob.Progress = nil
	rest, err := b.CollectOnce(ctx, ob, false)
	if err != nil || rest.Rows+cut.Rows != rows || pa.Versions+cut.Versions+rest.Versions != dry.Versions {
		t.Fatalf("share 1 resumed: %+v after %+v, %v; with share 0's %d, want the %d old versions", rest, cut, err, pa.Versions, dry.Versions)
	}
	if again, err := a.CollectOnce(ctx, o, true); err != nil || again.Versions != 0 {
		t.Fatalf("after both shares a pass would remove %+v, %v; want nothing", again, err)
	}
}
