package storagetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// scanCounted scans with ScanCounted and returns the rows and keys visited.
func scanCounted(t testing.TB, c storage.Counted, f storage.Filter, limit int) ([]storage.Row, uint64) {
	t.Helper()
	var rows []storage.Row
	n, err := c.ScanCounted(ctx, nil, nil, f, limit, func(r storage.Row) bool {
		rows = append(rows, r)
		return true
	})
	if err != nil {
		t.Fatalf("ScanCounted: %v", err)
	}
	return rows, n
}

// testCounted: ScanCounted delivers what Scan does and counts at least the
// cells it delivers, but not the keys of other families nor, after
// CompactFamily, the cells deleted before it.
func testCounted(t *testing.T, s storage.Store) {
	c, ok := s.(storage.Counted)
	if !ok {
		t.Skip("store is not Counted")
	}
	const n = 300
	for i := range n {
		row := fmt.Sprintf("r%04d", i)
		put(t, s, row, set("n", "q", 1, "v"))
		for v := range 4 { // a bigger neighbour family the scan must not visit
			put(t, s, row, set("data", "q", uint64(v+1), "v"), set("notify", "q", uint64(v+1), "v"))
		}
	}
	f := storage.Filter{fam("n")}
	rows, visited := scanCounted(t, c, f, 0)
	expectRows(t, "ScanCounted vs Scan", rows, scan(t, s, "", "", f, 0))
	most := uint64(3 * n)
	if sr, ok := s.(storage.SharedRows); ok && sr.SharedRows() {
		most = 9 * n // every cell of every family of the rows passed
	}
	if len(rows) != n || visited < n || visited > most {
		t.Fatalf("scan of %d one-cell rows: %d rows, %d keys visited; want %d rows and %d to %d keys", n, len(rows), visited, n, n, most)
	}
	if _, v := scanCounted(t, c, f, 10); v > most/6 {
		t.Fatalf("scan limited to 10 rows visited %d keys", v)
	}
	for i := range n {
		put(t, s, fmt.Sprintf("r%04d", i), storage.DeleteCell("n", "q", 1))
	}
	if rows, _ := scanCounted(t, c, f, 0); len(rows) != 0 {
		t.Fatalf("after deleting every cell: %d rows", len(rows))
	}
	cp, ok := s.(storage.Compacter)
	if !ok {
		if _, v := scanCounted(t, c, f, 0); v != 0 && most == 3*n {
			t.Fatalf("store keeps no deletion markers (not a Compacter) but visited %d keys of an empty family", v)
		}
		return
	}
	if err := cp.CompactFamily(ctx, "n"); err != nil {
		t.Fatalf("CompactFamily: %v", err)
	}
	if _, v := scanCounted(t, c, f, 0); v > 8 {
		t.Fatalf("after CompactFamily, a scan of an empty family visited %d keys", v)
	}
	if got := scan(t, s, "", "", storage.Filter{fam("data")}, 0); len(got) != n || len(got[0].Cells) != 4 {
		t.Fatalf("CompactFamily changed another family: %d rows", len(got))
	}
	if err := cp.CompactFamily(ctx, ""); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("CompactFamily(\"\") = %v, want ErrInvalidArgument", err)
	}
}
