package txn

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// TestHeartbeatKeepsLongCommitAlive: a commit stalled past its lock TTL
// (between the prewrites and the commit point) keeps its primary lock
// fresh, so a reader waits instead of rolling it back, and the commit
// then succeeds. Real time, short TTL: the heartbeat is the driver's timer.
func TestHeartbeatKeepsLongCommitAlive(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	w := e.client("writer")
	w.opts.LockTTL = 300 * time.Millisecond // beats every 100ms: a loaded machine may stall one
	w.opts.Now = time.Now
	r := e.client("reader")
	r.opts.Now = time.Now
	tx, _ := w.Begin(ctx)
	_ = tx.Set("a", "v", []byte("1"))
	_ = tx.Set("b", "v", []byte("2"))
	stalled := make(chan struct{})
	resume := make(chan struct{})
	w.crash = func(p string) bool {
		if p == crashAfterSecondaryPrewrite {
			close(stalled)
			<-resume
		}
		return false
	}
	done := make(chan error, 1)
	go func() { done <- tx.Commit(ctx) }()
	<-stalled
	reader, _ := r.BeginReadOnly(ctx)
	// Well past the TTL, the lock is still alive thanks to the heartbeat.
	deadline := time.Now().Add(1200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if _, err := r.getOnce(ctx, reader.StartTS(), []byte("a"), "v"); err != errLocked {
			t.Fatalf("reader got %v while the owner is heartbeating; want errLocked", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatalf("commit after the stall: %v", err)
	}
}

// TestLateHeartbeatKeepsNewerTime: a heartbeat whose first copy is
// delivered late, after the next heartbeat, must not move the lock's time
// back (DESIGN invariant 7 with invariant 10: a heartbeat is sent without
// a nonce, so a copy may land in any order). A reader whose clock is past
// the first beat's expiry but not the second's must still find the lock
// alive.
func TestLateHeartbeatKeepsNewerTime(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { testLateHeartbeat(t, backend) })
	}
}

func testLateHeartbeat(t *testing.T, backend string) {
	ctx := context.Background()
	base := newEnvBackend(t, backend)
	// Every call without a nonce sent while faults are on is delivered
	// again when Flush says, never before.
	st, lossy := storagetest.NewLossy(base.store, storagetest.LossyOptions{Seed: 1, Duplicate: 1, FlushOdds: math.MaxInt})
	lossy.SetEnabled(false)
	e := newEnvOn(t, st, base.indexed)
	w := e.client("writer")
	r := e.client("reader")
	tx, _ := w.Begin(ctx)
	_ = tx.Set("a", "v", []byte("1"))
	rows := groupByRow(tx.writes)
	primary := &tx.writes[0]
	if err := w.prewrite(ctx, tx, rows[0], primary, nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(4 * time.Second)
	lossy.SetEnabled(true) // the first beat's copy is held
	if ok, err := w.refreshLock(ctx, tx.startTS, primary); !ok || err != nil {
		t.Fatalf("first heartbeat: %v, %v", ok, err)
	}
	lossy.SetEnabled(false)
	e.clock.Advance(4 * time.Second)
	if ok, err := w.refreshLock(ctx, tx.startTS, primary); !ok || err != nil {
		t.Fatalf("second heartbeat: %v, %v", ok, err)
	}
	second := w.nowMS()
	lossy.Flush() // the first beat lands now, after the second
	if got := lossy.Stats().Duplicated; got != 1 {
		t.Fatalf("%d calls duplicated, want the first heartbeat's one", got)
	}
	st0, err := w.status(ctx, primary.row, primary.col, tx.startTS)
	if err != nil || st0.kind != stLocked {
		t.Fatalf("status: %v, %v", st0.kind, err)
	}
	if st0.lock.WallMS != second {
		t.Errorf("the lock's wall time is %d after a late copy of the first heartbeat; want the second's %d", st0.lock.WallMS, second)
	}
	// 7s after the second beat (TTL 10s): alive; 11s after the first.
	e.clock.Advance(7 * time.Second)
	reader, _ := r.BeginReadOnly(ctx)
	if _, err := r.getOnce(ctx, reader.StartTS(), []byte("a"), "v"); !errors.Is(err, errLocked) {
		t.Fatalf("reader got %v within the TTL of the newest heartbeat; want errLocked", err)
	}
}
