package txn

import (
	"context"
	"testing"
	"time"
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
		if p == CrashAfterSecondaryPrewrite {
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
