package txn

import (
	"context"
	"fmt"
	"testing"
)

// skippedHistory commits cells of column v whose newest write records
// are ones a reader skips, and returns what a snapshot after them holds
// of each row (absent for none): s0 a value under a rollback record, s1
// one under six rollback records (more than a read's first pages), s2 a
// delete under a rollback, s3 a rollback alone, s4 a value alone, s5 a
// value under two lock-only records.
func skippedHistory(t *testing.T, e *env) map[string]string {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{"w", "loser", "winner"} {
		e.client(name).opts.InlineSize = 4 << 10 // values inline in their records, as by default
	}
	commitValue(t, e, "w", "s0", "v", "a")
	rollBack(t, e, "s0", "v")
	commitValue(t, e, "w", "s1", "v", "b")
	for range 6 {
		rollBack(t, e, "s1", "v")
	}
	commitValue(t, e, "w", "s2", "v", "c")
	del, err := e.client("w").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := del.Delete("s2", "v"); err != nil {
		t.Fatal(err)
	}
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rollBack(t, e, "s2", "v")
	rollBack(t, e, "s3", "v")
	commitValue(t, e, "w", "s4", "v", "e")
	commitValue(t, e, "w", "s5", "v", "f")
	commitForUpdate(t, e, "w", "s5/v")
	commitForUpdate(t, e, "w", "s5/v")
	return map[string]string{"s0": "a", "s1": "b", "s4": "e", "s5": "f"}
}

// TestScanPastSkippedRecords: a scan returns, of each row, the value of
// the newest put below its snapshot, passing the rollback and lock-only
// records above it, and no row where that is a delete or there is none;
// as a point read of each row in the same snapshot does.
func TestScanPastSkippedRecords(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvBackend(t, backend)
			want := skippedHistory(t, e)
			tx, err := e.client("r").BeginReadOnly(ctx)
			if err != nil {
				t.Fatal(err)
			}
			kvs, err := tx.Scan(ctx, "s", "t", "v", 0)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range kvs {
				got[string(kv.Row)] = string(kv.Value)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("scan: %v; want %v", got, want)
			}
			for i := range 6 {
				row := fmt.Sprintf("s%d", i)
				v, err := tx.Get(ctx, row, "v")
				if w, ok := want[row]; ok != (err == nil) || string(v) != w {
					t.Errorf("Get %s = %q, %v; the scan's answer is %q (present %v)", row, v, err, w, ok)
				}
			}
		})
	}
}
