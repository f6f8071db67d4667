package storagetest

import (
	"fmt"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

func keysOf(rows []storage.Row) []string {
	ks := make([]string, len(rows))
	for i, r := range rows {
		ks[i] = string(r.Key)
	}
	return ks
}

func expectKeys(t testing.TB, what string, rows []storage.Row, want ...string) {
	t.Helper()
	got := keysOf(rows)
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("%s: rows %q, want %q", what, got, want)
	}
}

func testScan(t *testing.T, s storage.Store) {
	expectKeys(t, "empty store", scan(t, s, "", "", everything(), 0))
	for _, row := range []string{"d", "b", "a", "c", "e", "b\x00"} {
		put(t, s, row, set("a", "q", 1, row))
	}
	f := storage.Filter{fam("a")}
	expectKeys(t, "everything", scan(t, s, "", "", f, 0), "a", "b", "b\x00", "c", "d", "e")
	expectKeys(t, "[b, d)", scan(t, s, "b", "d", f, 0), "b", "b\x00", "c")
	expectKeys(t, "[b\\x00, c\\x00)", scan(t, s, "b\x00", "c\x00", f, 0), "b\x00", "c")
	expectKeys(t, "[bb, cc) between rows", scan(t, s, "bb", "cc", f, 0), "c")
	expectKeys(t, "[c, nil)", scan(t, s, "c", "", f, 0), "c", "d", "e")
	expectKeys(t, "[nil, c)", scan(t, s, "", "c", f, 0), "a", "b", "b\x00")
	expectKeys(t, "[c, c)", scan(t, s, "c", "c", f, 0))
	expectKeys(t, "[f, nil)", scan(t, s, "f", "", f, 0))
	expectKeys(t, "limit 2", scan(t, s, "b", "", f, 2), "b", "b\x00")
	expectKeys(t, "limit above the row count", scan(t, s, "", "", f, 100), "a", "b", "b\x00", "c", "d", "e")
	rows := scan(t, s, "c", "d", f, 0)
	expectRows(t, "cells of a scanned row", rows, []storage.Row{{Key: []byte("c"), Cells: []storage.Cell{cell("a", "q", 1, "c")}}})

	calls := 0
	err := s.Scan(ctx, nil, nil, f, 0, func(storage.Row) bool {
		calls++
		return calls < 2
	})
	if err != nil || calls != 2 {
		t.Fatalf("fn returning false after 2 rows: %d calls, err %v", calls, err)
	}
}

func testScanSkipsUnselected(t *testing.T, s storage.Store) {
	put(t, s, "1", set("a", "q", 5, "in"))
	put(t, s, "2", set("b", "q", 5, "other family"))
	put(t, s, "3", set("a", "other", 5, "other qualifier"))
	put(t, s, "4", set("a", "q", 9, "out of range"))
	put(t, s, "5", set("a", "q", 1, "in"), set("a", "q", 9, "out"))
	put(t, s, "6", set("a", "q", 2, "deleted"), storage.DeleteCell("a", "q", 2))
	rows := scan(t, s, "", "", storage.Filter{col("a", "q", storage.Before(9))}, 0)
	expectRows(t, "scan a:q before 9", rows, []storage.Row{
		{Key: []byte("1"), Cells: []storage.Cell{cell("a", "q", 5, "in")}},
		{Key: []byte("5"), Cells: []storage.Cell{cell("a", "q", 1, "in")}},
	})
	expectKeys(t, "limit counts delivered rows only", scan(t, s, "", "", storage.Filter{col("a", "q", storage.Before(9))}, 2), "1", "5")
	expectKeys(t, "nil filter", scan(t, s, "", "", nil, 0))
}

func testScanFamilyIsolation(t *testing.T, s storage.Store) {
	for i := range 20 {
		row := fmt.Sprintf("row%02d", i)
		put(t, s, row, set("data", "c", 1, "data"), set("lock", "c", 1, "lock"))
		if i%5 == 0 {
			put(t, s, row, set("notify", "c", 1, "dirty"))
		}
	}
	put(t, s, "row05", set("n", "c", 1, "n is not notify"))
	rows := scan(t, s, "", "", storage.Filter{fam("notify")}, 0)
	var want []storage.Row
	for _, k := range []string{"row00", "row05", "row10", "row15"} {
		want = append(want, storage.Row{Key: []byte(k), Cells: []storage.Cell{cell("notify", "c", 1, "dirty")}})
	}
	expectRows(t, "notify scan", rows, want)
	rows = scan(t, s, "row04", "row11", storage.Filter{fam("notify"), col("lock", "c", storage.TimeRange{})}, 0)
	expectKeys(t, "two-family scan", rows, "row04", "row05", "row06", "row07", "row08", "row09", "row10")
	expectCells(t, "cells of row05 in two families", rows[1].Cells,
		[]storage.Cell{cell("lock", "c", 1, "lock"), cell("notify", "c", 1, "dirty")})
	expectCells(t, "cells of row04 in two families", rows[0].Cells, []storage.Cell{cell("lock", "c", 1, "lock")})
}

func testScanManyRows(t *testing.T, s storage.Store) {
	const n = 300
	for i := range n {
		row := fmt.Sprintf("%04d", i)
		if i%3 == 0 {
			put(t, s, row, set("b", "q", 1, row)) // unselected
			continue
		}
		put(t, s, row, set("a", "q", 1, row))
	}
	var want []string
	for i := range n {
		if i%3 != 0 {
			want = append(want, fmt.Sprintf("%04d", i))
		}
	}
	f := storage.Filter{fam("a")}
	expectKeys(t, "all rows", scan(t, s, "", "", f, 0), want...)
	expectKeys(t, "limit 150", scan(t, s, "", "", f, 150), want[:150]...)
	expectKeys(t, "[0100, 0250)", scan(t, s, "0100", "0250", f, 0), want[66:166]...)
	calls := 0
	_ = s.Scan(ctx, nil, nil, f, 0, func(storage.Row) bool {
		calls++
		return calls < 130
	})
	if calls != 130 {
		t.Fatalf("early stop after 130 rows made %d calls", calls)
	}
}

// testScanCallbackReentry checks that fn may read and write the store
// (including rows the scan has yet to reach) without deadlocking.
func testScanCallbackReentry(t *testing.T, s storage.Store) {
	for i := range 100 {
		put(t, s, fmt.Sprintf("%03d", i), set("a", "q", 1, "v"))
	}
	seen := 0
	err := s.Scan(ctx, nil, nil, storage.Filter{fam("a")}, 0, func(r storage.Row) bool {
		seen++
		if _, err := s.ReadRow(ctx, r.Key, storage.Filter{fam("a")}); err != nil {
			t.Errorf("ReadRow in scan callback: %v", err)
		}
		if err := s.Mutate(ctx, r.Key, set("b", "seen", 1, "y")); err != nil {
			t.Errorf("Mutate in scan callback: %v", err)
		}
		return true
	})
	if err != nil || seen != 100 {
		t.Fatalf("scan with a writing callback: %d rows, err %v", seen, err)
	}
	expectKeys(t, "rows written by the callback", scan(t, s, "050", "053", storage.Filter{fam("b")}, 0), "050", "051", "052")
}
