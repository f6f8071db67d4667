package txn

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestScanRowsWaitsOnLiveLock: a lock older than the snapshot whose owner
// is alive and whose TTL has not passed holds ScanRows back (invariant 2)
// until the owner commits; then the snapshot's value is read (the commit
// came after the snapshot began, so not its value).
func TestScanRowsWaitsOnLiveLock(t *testing.T) {
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, backend == "indexed")
			w, _ := e.client("w").Begin(ctx)
			_ = w.Set("r", "v", []byte("1"))
			if err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			lk, _ := e.client("w").Begin(ctx)
			_ = lk.Set("r", "v", []byte("2"))
			rows := groupByRow(lk.writes)
			if err := lk.c.prewrite(ctx, lk, rows[0], &lk.writes[0], nil); err != nil {
				t.Fatal(err)
			}
			rd, _ := e.client("reader").BeginReadOnly(ctx)
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if cells, _, err := rd.ScanRows(short, nil, nil, 10, 0); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ScanRows past a live lock: %v, %v; want it to wait", cells, err)
			}
			ts, _ := e.oracle.Timestamp(ctx)
			if _, err := lk.c.commitPrimary(ctx, lk, rows[0], ts); err != nil {
				t.Fatal(err)
			}
			cells, next, err := rd.ScanRows(ctx, nil, nil, 10, 0)
			if err != nil || next != nil || len(cells) != 1 || string(cells[0].Value) != "1" {
				t.Fatalf("after the commit: %v, %q, %v; want r/v = 1", cells, next, err)
			}
		})
	}
}
