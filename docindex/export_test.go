package docindex

import (
	"context"
	"fmt"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestPagedScan: a scan of more rows than a page returns each row once,
// in order, whatever a page ends on, and tells its count after each page;
// rows just past the prefix are not read.
func TestPagedScan(t *testing.T) {
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const rows = 2*exportPage + 3
	if err := db.Update(ctx, func(tx *percolator.Txn) error {
		for i := range rows {
			if err := tx.Set(fmt.Sprintf("p/%05d", i), "c", []byte{1}); err != nil {
				return err
			}
		}
		return tx.Set("q/after", "c", []byte{1})
	}); err != nil {
		t.Fatal(err)
	}
	var told []int64
	err = db.View(ctx, func(tx *percolator.Txn) error {
		s := &pagedScan{tx: tx, read: func(n int64) { told = append(told, n) }}
		kvs, err := s.scan(ctx, "p/", "c")
		if err != nil {
			return err
		}
		if len(kvs) != rows {
			t.Fatalf("read %d rows, want %d", len(kvs), rows)
		}
		for i, kv := range kvs {
			if want := fmt.Sprintf("p/%05d", i); string(kv.Row) != want {
				t.Fatalf("row %d is %q, want %q", i, kv.Row, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{exportPage, 2 * exportPage, rows}; fmt.Sprint(told) != fmt.Sprint(want) {
		t.Fatalf("told %v, want %v", told, want)
	}
}
