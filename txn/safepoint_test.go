package txn

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSafePointMovesForward: the safe point only rises, whatever order
// proposals arrive in; 0 is refused.
func TestSafePointMovesForward(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, false)
	if sp, err := ReadSafePoint(ctx, e.store); err != nil || sp != 0 {
		t.Fatalf("a new store's safe point: %d, %v", sp, err)
	}
	for _, x := range []struct{ propose, want uint64 }{{100, 100}, {50, 100}, {100, 100}, {150, 150}} {
		if sp, err := AdvanceSafePoint(ctx, e.store, x.propose); err != nil || sp != x.want {
			t.Fatalf("propose %d: %d, %v; want %d", x.propose, sp, err, x.want)
		}
	}
	if _, err := AdvanceSafePoint(ctx, e.store, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("propose 0: %v", err)
	}
}

// TestSnapshotTooOld: once the safe point is above a transaction's
// start_ts, its reads (Get, Scan, ScanRows, CommitTS, found or not) fail with
// ErrSnapshotTooOld and return nothing; a transaction begun above it
// reads. A client reads by a safe point it cached for at most
// SafePointCache.
func TestSnapshotTooOld(t *testing.T) {
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, backend == "indexed")
			w, _ := e.client("w").Begin(ctx)
			_ = w.Set("r", "v", []byte("1"))
			if err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			c := e.client("reader")
			old, _ := c.Begin(ctx)
			if v, err := old.Get(ctx, "r", "v"); err != nil || string(v) != "1" {
				t.Fatalf("before any safe point: %q, %v", v, err) // caches safe point 0
			}
			if _, err := AdvanceSafePoint(ctx, e.store, old.StartTS()+1); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Get(ctx, "r", "v"); err != nil {
				t.Fatalf("within the cache bound the old safe point stands: %v", err)
			}
			c.safePoints.sent = time.Now().Add(-SafePointCache) // the cache has aged out
			v, err := old.Get(ctx, "r", "v")
			var too *SnapshotTooOldError
			if !errors.Is(err, ErrSnapshotTooOld) || !errors.As(err, &too) || too.StartTS != old.StartTS() || too.SafePoint != old.StartTS()+1 || v != nil {
				t.Fatalf("Get below the safe point: %q, %v; want ErrSnapshotTooOld", v, err)
			}
			if _, err := old.Get(ctx, "absent", "v"); !errors.Is(err, ErrSnapshotTooOld) {
				t.Fatalf("Get of an absent cell below the safe point: %v; want ErrSnapshotTooOld, not not-found", err)
			}
			if kvs, err := old.Scan(ctx, "", "", "v", 0); !errors.Is(err, ErrSnapshotTooOld) || kvs != nil {
				t.Fatalf("Scan below the safe point: %v, %v", kvs, err)
			}
			if cells, next, err := old.ScanRows(ctx, nil, nil, 10, 0); !errors.Is(err, ErrSnapshotTooOld) || cells != nil || next != nil {
				t.Fatalf("ScanRows below the safe point: %v, %q, %v", cells, next, err)
			}
			if _, err := CommitTS(ctx, old, "r", "v"); !errors.Is(err, ErrSnapshotTooOld) {
				t.Fatalf("CommitTS below the safe point: %v", err)
			}
			fresh, _ := c.Begin(ctx)
			if v, err := fresh.Get(ctx, "r", "v"); err != nil || string(v) != "1" {
				t.Fatalf("a transaction above the safe point: %q, %v", v, err)
			}
		})
	}
}
