package storagetest

import (
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

func versions(family, qualifier, value string, tss ...uint64) []storage.Cell {
	var cs []storage.Cell
	for _, ts := range tss {
		cs = append(cs, cell(family, qualifier, ts, value))
	}
	return cs
}

func testDeleteCells(t *testing.T, s storage.Store) {
	reset := func() {
		put(t, s, "r", storage.Mutation{Kind: storage.DeleteRow})
		for ts := uint64(1); ts <= 6; ts++ {
			put(t, s, "r", set("a", "q", ts, "v"), set("a", "p", ts, "p"), set("b", "q", ts, "b"))
		}
		put(t, s, "r2", set("a", "q", 3, "v"))
	}
	for _, tc := range []struct {
		name string
		m    storage.Mutation
		want []uint64
	}{
		{"exact ts", storage.DeleteCell("a", "q", 3), []uint64{6, 5, 4, 2, 1}},
		{"absent ts", storage.DeleteCell("a", "q", 9), []uint64{6, 5, 4, 3, 2, 1}},
		{"range [2,5)", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q", Time: storage.TimeRange{Start: 2, End: 5}}, []uint64{6, 5, 1}},
		{"From(4)", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q", Time: storage.From(4)}, []uint64{3, 2, 1}},
		{"Before(4)", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q", Time: storage.Before(4)}, []uint64{6, 5, 4}},
		{"every version", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q"}, nil},
		{"empty range", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q", Time: storage.TimeRange{Start: 4, End: 4}}, []uint64{6, 5, 4, 3, 2, 1}},
		{"absent column", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "zz"}, []uint64{6, 5, 4, 3, 2, 1}},
		{"absent family", storage.Mutation{Kind: storage.DeleteCells, Family: "n", Qualifier: "q"}, []uint64{6, 5, 4, 3, 2, 1}},
	} {
		reset()
		put(t, s, "r", tc.m)
		expectCells(t, tc.name, read(t, s, "r", storage.Filter{col("a", "q", storage.TimeRange{})}), versions("a", "q", "v", tc.want...))
		all := []uint64{6, 5, 4, 3, 2, 1}
		expectCells(t, tc.name+": other qualifier", read(t, s, "r", storage.Filter{col("a", "p", storage.TimeRange{})}), versions("a", "p", "p", all...))
		expectCells(t, tc.name+": other family", read(t, s, "r", storage.Filter{fam("b")}), versions("b", "q", "b", all...))
		expectCells(t, tc.name+": other row", read(t, s, "r2", storage.Filter{fam("a")}), versions("a", "q", "v", 3))
	}
	put(t, s, "r", storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q"})
	put(t, s, "r", set("a", "q", 3, "again"))
	expectCells(t, "put after delete", read(t, s, "r", storage.Filter{col("a", "q", storage.TimeRange{})}), versions("a", "q", "again", 3))
}

func testDeleteRow(t *testing.T, s storage.Store) {
	for _, row := range []string{"r", "r\x00", "q", "s"} {
		put(t, s, row, set("a", "x", 1, row), set("b", "y", 2, row), set("notify", "", 3, row))
	}
	put(t, s, "r", storage.Mutation{Kind: storage.DeleteRow})
	expectCells(t, "deleted row", read(t, s, "r", everything()), nil)
	for _, row := range []string{"r\x00", "q", "s"} {
		expectCells(t, "row "+row, read(t, s, row, everything()),
			[]storage.Cell{cell("a", "x", 1, row), cell("b", "y", 2, row), cell("notify", "", 3, row)})
	}
	if rows := scan(t, s, "", "", storage.Filter{fam("notify")}, 0); len(rows) != 3 {
		t.Fatalf("scan after DeleteRow: %s", fmtRows(rows))
	}
	put(t, s, "empty", storage.Mutation{Kind: storage.DeleteRow})
	expectCells(t, "DeleteRow of an absent row", read(t, s, "empty", everything()), nil)
}

func testMutationOrder(t *testing.T, s storage.Store) {
	put(t, s, "r", set("a", "q", 1, "v1"), storage.DeleteCell("a", "q", 1), set("a", "q", 1, "v2"))
	expectCells(t, "put, delete, put", read(t, s, "r", storage.Filter{fam("a")}), versions("a", "q", "v2", 1))
	put(t, s, "r", set("a", "q", 2, "x"), storage.Mutation{Kind: storage.DeleteCells, Family: "a", Qualifier: "q"})
	expectCells(t, "put then delete every version", read(t, s, "r", storage.Filter{fam("a")}), nil)
	put(t, s, "r", set("a", "q", 3, "x"), set("b", "q", 3, "x"), storage.Mutation{Kind: storage.DeleteRow}, set("b", "z", 4, "after"))
	expectCells(t, "put, DeleteRow, put", read(t, s, "r", everything()), versions("b", "z", "after", 4))
	put(t, s, "r")
	expectCells(t, "no mutations", read(t, s, "r", everything()), versions("b", "z", "after", 4))
}
