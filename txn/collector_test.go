package txn

import (
	"context"
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
		done <- c.RunCollector(cctx, CollectorOptions{Lifetime: 50 * time.Millisecond, Interval: 10 * time.Millisecond, delay: -1,
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
	waitFor("up to the open transaction", func(ps []CollectorPass) bool { return len(ps) > 0 && ps[len(ps)-1].SafePoint == long.StartTS() })
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
