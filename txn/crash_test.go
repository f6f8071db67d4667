package txn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

func getenv(k string) string { return os.Getenv(k) }

// TestCrashPoints stops a five-row commit after every step, as if its
// process died there; a reader in another process then sees the whole
// transaction or none of it, and its reads leave no lock behind.
func TestCrashPoints(t *testing.T) {
	points := []struct {
		point string
		nth   int // stop at the nth time the point is reached
		whole bool
	}{
		{crashAfterPrimaryPrewrite, 1, false},
		{crashAfterSecondaryPrewrite, 1, false},
		{crashAfterSecondaryPrewrite, 3, false},
		{crashAfterSecondaryPrewrite, 4, false},
		{crashAfterPrimaryCommit, 1, true},
		{crashAfterSecondaryCommit, 1, true},
		{crashAfterSecondaryCommit, 3, true},
	}
	for _, backend := range backends {
		for _, p := range points {
			for _, scan := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s#%d", backend, p.point, p.nth)
				if scan {
					name += "/scan"
				}
				t.Run(name, func(t *testing.T) {
					testCrashPoint(t, backend, p.point, p.nth, p.whole, scan)
				})
			}
		}
	}
}

// fiveRowTxn commits "old" to r0..r4 (column v) through c and returns
// a transaction of c that sets them all to "new", not yet committed.
func fiveRowTxn(ctx context.Context, t *testing.T, c *Client) *Txn {
	t.Helper()
	init, _ := c.Begin(ctx)
	for i := range 5 {
		_ = init.Set(fmt.Sprintf("r%d", i), "v", []byte("old"))
	}
	if err := init.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx, _ := c.Begin(ctx)
	for i := range 5 {
		_ = tx.Set(fmt.Sprintf("r%d", i), "v", []byte("new"))
	}
	return tx
}

func testCrashPoint(t *testing.T, backend string, point string, nth int, whole, scan bool) {
	ctx := context.Background()
	e := newEnvBackend(t, backend)
	writer := e.client("writer")
	writer.secondaryBatch = 1
	tx := fiveRowTxn(ctx, t, writer)
	seen := 0
	writer.crash = func(p string) bool {
		if p == point {
			seen++
		}
		return seen == nth
	}
	err := tx.Commit(ctx)
	if whole != (err == nil) {
		t.Fatalf("commit returned %v", err)
	}
	if !whole && !errors.Is(err, errCrashed) {
		t.Fatalf("commit returned %v, want the crash", err)
	}
	e.live.Unregister("writer") // the process died

	reader := e.client("reader")
	want := map[bool]string{true: "new", false: "old"}[whole]
	if scan {
		// A scan meets every lock the crash left (all of one transaction),
		// resolves them, and reads past the records they leave.
		r, _ := reader.BeginReadOnly(ctx)
		kvs, err := r.Scan(ctx, "r0", "r5", "v", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(kvs) != 5 {
			t.Fatalf("scan returned %d rows, want 5: %q", len(kvs), kvs)
		}
		for i, kv := range kvs {
			if string(kv.Row) != fmt.Sprintf("r%d", i) || string(kv.Value) != want {
				t.Fatalf("scan row %d: %s = %q; want r%d = %q", i, kv.Row, kv.Value, i, want)
			}
		}
	}
	r, _ := reader.BeginReadOnly(ctx)
	for i := range 5 {
		v, err := r.Get(ctx, fmt.Sprintf("r%d", i), "v")
		if err != nil || string(v) != want {
			t.Fatalf("r%d = %q, %v; want %q", i, v, err, want)
		}
	}
	if n := countLocks(t, e.store); n != 0 {
		t.Fatalf("%d locks survive the reads", n)
	}
	if ix := e.base.index; ix != nil && ix.lockCount() != 0 {
		t.Fatalf("index still holds %d locks", ix.lockCount())
	}
}

// TestResolveLocksProgress: ResolveLocks settles the locks a crash left
// and reports its progress, the total once listed and then each lock.
func TestResolveLocksProgress(t *testing.T) {
	ctx := context.Background()
	e := newEnvBackend(t, backends[0])
	writer := e.client("writer")
	writer.secondaryBatch = 1
	tx, _ := writer.Begin(ctx)
	for i := range 5 {
		_ = tx.Set(fmt.Sprintf("r%d", i), "v", []byte("new"))
	}
	writer.crash = func(p string) bool { return p == crashAfterPrimaryCommit }
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.live.Unregister("writer")
	var calls [][2]int
	n, err := e.client("resolver").ResolveLocks(ctx, func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil || n != 4 {
		t.Fatalf("ResolveLocks: %d, %v; want the 4 secondaries' locks", n, err)
	}
	want := [][2]int{{0, 4}, {1, 4}, {2, 4}, {3, 4}, {4, 4}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("progress %v, want %v", calls, want)
	}
	if n := countLocks(t, e.store); n != 0 {
		t.Fatalf("%d locks survive", n)
	}
}

// TestCrashAfterPrimaryRollback: a five-row commit that meets a conflict
// on its fourth row stops right after its abort rolled back the primary's
// row, as if its process died there; a reader then sees none of it (the
// rows' old values, the fourth's newer one), resolving the locks left on
// the other rows at once by the primary's rollback record, not by their
// expiry.
func TestCrashAfterPrimaryRollback(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvBackend(t, backend)
			writer := e.client("writer")
			tx := fiveRowTxn(ctx, t, writer)
			other := e.client("other")
			o, _ := other.Begin(ctx)
			_ = o.Set("r3", "v", []byte("other"))
			if err := o.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			crashed := 0
			writer.crash = func(p string) bool {
				if p == crashAfterPrimaryRollback {
					crashed++
					return true
				}
				return false
			}
			if err := tx.Commit(ctx); !errors.Is(err, errCrashed) || crashed != 1 {
				t.Fatalf("commit = %v after %d crash points; want the crash after the primary's rollback", err, crashed)
			}
			if countLocks(t, e.store) == 0 {
				t.Fatal("no lock left behind: the crash point is after the secondaries' rollback")
			}
			// The writer's process is alive and its locks young: the
			// reader resolves them by the primary's rollback record alone.
			reader := e.client("reader")
			r, _ := reader.BeginReadOnly(ctx)
			for i := range 5 {
				want := "old"
				if i == 3 {
					want = "other"
				}
				v, err := r.Get(ctx, fmt.Sprintf("r%d", i), "v")
				if err != nil || string(v) != want {
					t.Fatalf("r%d = %q, %v; want %q", i, v, err, want)
				}
			}
			if n := countLocks(t, e.store); n != 0 {
				t.Fatalf("%d locks survive the reads", n)
			}
		})
	}
}
