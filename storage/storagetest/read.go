package storagetest

import (
	"bytes"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

func testPutRead(t *testing.T, s storage.Store) {
	expectCells(t, "empty store", read(t, s, "r", everything()), nil)
	put(t, s, "r", set("a", "q", 5, "v5"), set("a", "empty", 1, ""))
	expectCells(t, "column", read(t, s, "r", storage.Filter{col("a", "q", storage.TimeRange{})}),
		[]storage.Cell{cell("a", "q", 5, "v5")})
	expectCells(t, "empty value", read(t, s, "r", storage.Filter{col("a", "empty", storage.TimeRange{})}),
		[]storage.Cell{cell("a", "empty", 1, "")})
	expectCells(t, "other row", read(t, s, "r2", everything()), nil)
	expectCells(t, "other family", read(t, s, "r", storage.Filter{fam("b")}), nil)
	expectCells(t, "other qualifier", read(t, s, "r", storage.Filter{col("a", "q2", storage.TimeRange{})}), nil)
	expectCells(t, "nil filter", read(t, s, "r", nil), nil)
	expectCells(t, "empty filter", read(t, s, "r", storage.Filter{}), nil)
	big := bytes.Repeat([]byte{0xAB}, 1<<20)
	if err := s.Mutate(ctx, []byte("r"), storage.SetCell("a", "big", 2, big)); err != nil {
		t.Fatalf("Mutate of a 1 MiB value: %v", err)
	}
	got := read(t, s, "r", storage.Filter{col("a", "big", storage.At(2))})
	if len(got) != 1 || !bytes.Equal(got[0].Value, big) {
		t.Fatalf("1 MiB value did not round-trip")
	}
}

func testOrdering(t *testing.T, s storage.Store) {
	// Written in scrambled order; read back in (family, qualifier, ts desc).
	put(t, s, "r",
		set("b", "y", 1, "b-y-1"),
		set("a", "x\x00", 3, "a-x0-3"),
		set("ab", "", 2, "ab--2"),
		set("a", "x", 1, "a-x-1"),
		set("a", "", 7, "a--7"),
		set("a", "x", 9, "a-x-9"),
		set("b", "\xff", 4, "b-ff-4"),
		set("a", "x", 5, "a-x-5"),
	)
	want := []storage.Cell{
		cell("a", "", 7, "a--7"),
		cell("a", "x", 9, "a-x-9"),
		cell("a", "x", 5, "a-x-5"),
		cell("a", "x", 1, "a-x-1"),
		cell("a", "x\x00", 3, "a-x0-3"),
		cell("ab", "", 2, "ab--2"),
		cell("b", "y", 1, "b-y-1"),
		cell("b", "\xff", 4, "b-ff-4"),
	}
	expectCells(t, "all families", read(t, s, "r", storage.Filter{fam("b"), fam("ab"), fam("a")}), want)
	expectCells(t, "qualifier selectors in reverse order", read(t, s, "r", storage.Filter{
		col("b", "\xff", storage.TimeRange{}), col("a", "x\x00", storage.TimeRange{}), col("a", "x", storage.TimeRange{}),
	}), []storage.Cell{want[1], want[2], want[3], want[4], want[7]})
}

func testOverwrite(t *testing.T, s storage.Store) {
	put(t, s, "r", set("a", "q", 3, "old"))
	put(t, s, "r", set("a", "q", 3, "new"))
	put(t, s, "r", set("a", "q", 2, "two"), set("a", "q", 2, "two'"))
	expectCells(t, "overwritten versions", read(t, s, "r", storage.Filter{fam("a")}),
		[]storage.Cell{cell("a", "q", 3, "new"), cell("a", "q", 2, "two'")})
}

func testTimeRange(t *testing.T, s storage.Store) {
	max := storage.MaxTimestampOf(s)
	for _, ts := range []uint64{0, 1, 5, 9, max} {
		put(t, s, "r", set("a", "q", ts, "v"))
	}
	for _, tc := range []struct {
		name string
		tr   storage.TimeRange
		want []uint64
	}{
		{"zero range is everything", storage.TimeRange{}, []uint64{max, 9, 5, 1, 0}},
		{"At(5)", storage.At(5), []uint64{5}},
		{"At(4)", storage.At(4), nil},
		{"At(0)", storage.At(0), []uint64{0}},
		{"At(max)", storage.At(max), []uint64{max}},
		{"Before(5) excludes 5", storage.Before(5), []uint64{1, 0}},
		{"Before(1)", storage.Before(1), []uint64{0}},
		{"From(5) includes 5", storage.From(5), []uint64{max, 9, 5}},
		{"From(max)", storage.From(max), []uint64{max}},
		{"[1,9) half-open", storage.TimeRange{Start: 1, End: 9}, []uint64{5, 1}},
		{"[2,5) empty", storage.TimeRange{Start: 2, End: 5}, nil},
		{"[5,5) empty", storage.TimeRange{Start: 5, End: 5}, nil},
		{"[6,0) unbounded end", storage.TimeRange{Start: 6}, []uint64{max, 9}},
	} {
		var want []storage.Cell
		for _, ts := range tc.want {
			want = append(want, cell("a", "q", ts, "v"))
		}
		expectCells(t, tc.name, read(t, s, "r", storage.Filter{col("a", "q", tc.tr)}), want)
		all := storage.Filter{{Family: "a", AllQualifiers: true, Time: tc.tr}}
		expectCells(t, tc.name+" (AllQualifiers)", read(t, s, "r", all), want)
	}
}

func testLimit(t *testing.T, s storage.Store) {
	for ts := uint64(1); ts <= 5; ts++ {
		put(t, s, "r", set("a", "p", ts, "p"), set("a", "q", ts, "q"), set("b", "p", ts, "b"))
	}
	sel := func(q string, all bool, tr storage.TimeRange, limit int) storage.Filter {
		return storage.Filter{{Family: "a", Qualifier: q, AllQualifiers: all, Time: tr, Limit: limit}}
	}
	expectCells(t, "Limit 1", read(t, s, "r", sel("q", false, storage.TimeRange{}, 1)),
		[]storage.Cell{cell("a", "q", 5, "q")})
	expectCells(t, "Limit 2 after the time filter", read(t, s, "r", sel("q", false, storage.Before(5), 2)),
		[]storage.Cell{cell("a", "q", 4, "q"), cell("a", "q", 3, "q")})
	expectCells(t, "Limit 2 within [2,4)", read(t, s, "r", sel("q", false, storage.TimeRange{Start: 2, End: 4}, 2)),
		[]storage.Cell{cell("a", "q", 3, "q"), cell("a", "q", 2, "q")})
	expectCells(t, "Limit larger than the versions", read(t, s, "r", sel("q", false, storage.From(4), 10)),
		[]storage.Cell{cell("a", "q", 5, "q"), cell("a", "q", 4, "q")})
	expectCells(t, "Limit is per column", read(t, s, "r", sel("", true, storage.Before(4), 1)),
		[]storage.Cell{cell("a", "p", 3, "p"), cell("a", "q", 3, "q")})
}

func testUnionFilter(t *testing.T, s storage.Store) {
	for ts := uint64(1); ts <= 4; ts++ {
		put(t, s, "r", set("a", "p", ts, "p"), set("a", "q", ts, "q"), set("b", "x", ts, "x"))
	}
	f := storage.Filter{
		col("a", "q", storage.At(2)),
		{Family: "a", Qualifier: "q", Limit: 1},
		col("b", "x", storage.From(4)),
		col("a", "q", storage.TimeRange{Start: 1, End: 3}), // overlaps the first: no duplicates
		col("a", "missing", storage.TimeRange{}),
	}
	expectCells(t, "union", read(t, s, "r", f), []storage.Cell{
		cell("a", "q", 4, "q"), cell("a", "q", 2, "q"), cell("a", "q", 1, "q"), cell("b", "x", 4, "x"),
	})
	twice := storage.Filter{fam("a"), fam("a"), col("a", "p", storage.TimeRange{})}
	if got := read(t, s, "r", twice); len(got) != 8 {
		t.Fatalf("a cell selected by several selectors must appear once: got %s", fmtCells(got))
	}
}

// trickyRows sort bytewise in this order and hold NUL and 0xFF bytes and
// rows that are prefixes of others.
var trickyRows = []string{
	"\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "a\x00\x00", "a\x00b", "a\x01",
	"ab", "a\xff", "b", "\xff", "\xff\x00", "\xff\xfe\xff", // (rows beginning storage.ReservedPrefix are the system's: a server refuses them)
}

func testTrickyRowKeys(t *testing.T, s storage.Store) {
	for i, row := range trickyRows {
		put(t, s, row, set("a", "q\x00", 1, row), set("b", "", uint64(i), row))
	}
	long := string(bytes.Repeat([]byte{0x00, 0xff}, storage.MaxRowKeySize/2))
	put(t, s, long, set("a", "q\x00", 1, "long"))
	for i, row := range trickyRows {
		expectCells(t, "row "+row, read(t, s, row, storage.Filter{fam("a"), fam("b")}),
			[]storage.Cell{cell("a", "q\x00", 1, row), cell("b", "", uint64(i), row)})
	}
	expectCells(t, "4096-byte row", read(t, s, long, storage.Filter{fam("a")}), []storage.Cell{cell("a", "q\x00", 1, "long")})
	rows := scan(t, s, "", "", storage.Filter{fam("b")}, 0)
	if len(rows) != len(trickyRows) {
		t.Fatalf("scan returned %d rows, want %d: %s", len(rows), len(trickyRows), fmtRows(rows))
	}
	for i, r := range rows {
		if string(r.Key) != trickyRows[i] {
			t.Fatalf("scan row %d is %q, want %q", i, r.Key, trickyRows[i])
		}
	}
	rows = scan(t, s, "a\x00", "a\x01", storage.Filter{fam("a")}, 0)
	if len(rows) != 3 || string(rows[0].Key) != "a\x00" || string(rows[2].Key) != "a\x00b" {
		t.Fatalf("scan [a\\x00, a\\x01) = %s", fmtRows(rows))
	}
}
