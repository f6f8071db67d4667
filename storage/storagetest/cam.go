package storagetest

import (
	"encoding/binary"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

func checkAndMutate(t testing.TB, s storage.Store, row string, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) bool {
	t.Helper()
	matched, err := s.CheckAndMutate(ctx, []byte(row), pred, ifTrue, ifFalse)
	if err != nil {
		t.Fatalf("CheckAndMutate(%q): %v", row, err)
	}
	return matched
}

func testCheckAndMutate(t *testing.T, s storage.Store) {
	lock := storage.Filter{fam("lock")}
	ifTrue := []storage.Mutation{set("data", "t", 1, "true")}
	ifFalse := []storage.Mutation{set("data", "f", 1, "false")}
	if checkAndMutate(t, s, "r", lock, ifTrue, ifFalse) {
		t.Fatal("predicate on an empty row matched")
	}
	expectCells(t, "after the false branch", read(t, s, "r", everything()), []storage.Cell{cell("data", "f", 1, "false")})
	put(t, s, "r", set("lock", "c", 7, "L"))
	if !checkAndMutate(t, s, "r", lock, ifTrue, ifFalse) {
		t.Fatal("predicate on a locked row did not match")
	}
	expectCells(t, "after the true branch", read(t, s, "r", storage.Filter{fam("data")}),
		[]storage.Cell{cell("data", "f", 1, "false"), cell("data", "t", 1, "true")})

	before := dump(t, s)
	if !checkAndMutate(t, s, "r", lock, nil, ifFalse) {
		t.Fatal("matched predicate with an empty true branch reported false")
	}
	if checkAndMutate(t, s, "r", storage.Filter{fam("notify")}, ifTrue, nil) {
		t.Fatal("unmatched predicate with an empty false branch reported true")
	}
	if checkAndMutate(t, s, "r", nil, ifTrue, nil) {
		t.Fatal("nil predicate matched")
	}
	if !checkAndMutate(t, s, "r", lock, nil, nil) {
		t.Fatal("both branches empty: matched predicate reported false")
	}
	expectRows(t, "empty branches change nothing", dump(t, s), before)

	if checkAndMutate(t, s, "r", storage.Filter{col("lock", "c", storage.Before(7))}, nil, []storage.Mutation{storage.DeleteCell("lock", "c", 7)}) {
		t.Fatal("predicate Before(7) matched a cell at 7")
	}
	expectCells(t, "lock erased by the false branch", read(t, s, "r", lock), nil)
	if checkAndMutate(t, s, "other", storage.Filter{fam("data")}, ifTrue, nil) {
		t.Fatal("predicate matched another row's cells")
	}
}

// testCheckAndMutateExactTS is the protocol's use: act only on the version
// at one exact timestamp.
func testCheckAndMutateExactTS(t *testing.T, s storage.Store) {
	put(t, s, "r", set("lock", "c", 10, "L10"), set("lock", "c", 12, "L12"))
	erase := func(ts uint64) []storage.Mutation { return []storage.Mutation{storage.DeleteCell("lock", "c", ts)} }
	if checkAndMutate(t, s, "r", storage.Filter{col("lock", "c", storage.At(11))}, erase(11), nil) {
		t.Fatal("At(11) matched with versions at 10 and 12")
	}
	if !checkAndMutate(t, s, "r", storage.Filter{col("lock", "c", storage.At(10))}, erase(10), nil) {
		t.Fatal("At(10) did not match the version at 10")
	}
	expectCells(t, "after erasing exactly ts 10", read(t, s, "r", storage.Filter{fam("lock")}), versions("lock", "c", "L12", 12))
	if checkAndMutate(t, s, "r", storage.Filter{col("lock", "c", storage.At(10))}, erase(12), nil) {
		t.Fatal("retried At(10) matched after the erase")
	}
	expectCells(t, "the retry changed nothing", read(t, s, "r", storage.Filter{fam("lock")}), versions("lock", "c", "L12", 12))
	if checkAndMutate(t, s, "r", storage.Filter{col("lock", "other", storage.At(12))}, erase(12), nil) {
		t.Fatal("predicate on another qualifier matched")
	}
}

func testCheckAndMutateUnion(t *testing.T, s storage.Store) {
	put(t, s, "r", set("b", "x", 5, "x"))
	miss := col("a", "x", storage.TimeRange{})
	hit := col("b", "x", storage.From(5))
	if !checkAndMutate(t, s, "r", storage.Filter{miss, hit}, []storage.Mutation{set("a", "t", 1, "")}, nil) {
		t.Fatal("union whose second selector matches did not match")
	}
	if checkAndMutate(t, s, "r", storage.Filter{miss, col("b", "x", storage.From(6))}, nil, []storage.Mutation{set("a", "f", 1, "")}) {
		t.Fatal("union where no selector matches matched")
	}
	expectCells(t, "branches of the union checks", read(t, s, "r", storage.Filter{fam("a")}),
		[]storage.Cell{cell("a", "f", 1, ""), cell("a", "t", 1, "")})
}

func counter(v int64) string {
	return string(binary.BigEndian.AppendUint64(nil, uint64(v)))
}

func increment(t testing.TB, s storage.Store, row, family, qualifier string, delta int64) int64 {
	t.Helper()
	v, err := s.Increment(ctx, []byte(row), family, qualifier, delta)
	if err != nil {
		t.Fatalf("Increment(%q, %d): %v", row, delta, err)
	}
	return v
}

func testIncrement(t *testing.T, s storage.Store) {
	steps := []struct{ delta, want int64 }{{5, 5}, {0, 5}, {-7, -2}, {-1 << 40, -2 - 1<<40}, {1<<40 + 10, 8}}
	for _, st := range steps {
		if got := increment(t, s, "r", "a", "n", st.delta); got != st.want {
			t.Fatalf("Increment by %d = %d, want %d", st.delta, got, st.want)
		}
	}
	expectCells(t, "counter cell", read(t, s, "r", storage.Filter{fam("a")}), []storage.Cell{cell("a", "n", 0, counter(8))})
	if got := increment(t, s, "r", "a", "m", -3); got != -3 {
		t.Fatalf("Increment of an absent counter by -3 = %d", got)
	}
	if got := increment(t, s, "r2", "a", "n", 1); got != 1 {
		t.Fatalf("counters are per row: got %d", got)
	}
	put(t, s, "r", set("a", "n", 9, counter(100)), set("a", "n", 4, counter(50)))
	if got := increment(t, s, "r", "a", "n", 1); got != 101 {
		t.Fatalf("Increment must read the newest version: got %d, want 101", got)
	}
	expectCells(t, "increment replaces every version", read(t, s, "r", storage.Filter{col("a", "n", storage.TimeRange{})}),
		[]storage.Cell{cell("a", "n", 0, counter(101))})
}

func testMutateRows(t *testing.T, s storage.Store) {
	b, ok := s.(storage.Batcher)
	if !ok {
		t.Skip("not a Batcher")
	}
	errs, err := b.MutateRows(ctx, []storage.RowMutation{
		{Row: []byte("x"), Mutations: []storage.Mutation{set("a", "q", 1, "x1"), set("b", "q", 1, "xb")}},
		{Row: []byte("y"), Mutations: []storage.Mutation{set("a", "q", 1, "y1")}},
		{Row: []byte("x"), Mutations: []storage.Mutation{storage.DeleteCell("a", "q", 1), set("a", "q", 2, "x2")}},
		{Row: []byte("z")},
	})
	if err != nil || errs != nil {
		t.Fatalf("MutateRows: errs %v, err %v", errs, err)
	}
	expectCells(t, "row x", read(t, s, "x", everything()), []storage.Cell{cell("a", "q", 2, "x2"), cell("b", "q", 1, "xb")})
	expectCells(t, "row y", read(t, s, "y", everything()), []storage.Cell{cell("a", "q", 1, "y1")})
	expectCells(t, "row z", read(t, s, "z", everything()), nil)
	if errs, err := b.MutateRows(ctx, nil); err != nil || errs != nil {
		t.Fatalf("MutateRows(nil): errs %v, err %v", errs, err)
	}
	var many []storage.RowMutation
	for i := range 500 {
		many = append(many, storage.RowMutation{Row: []byte{byte(i >> 8), byte(i)}, Mutations: []storage.Mutation{set("n", "", 1, "v")}})
	}
	if errs, err := b.MutateRows(ctx, many); err != nil || errs != nil {
		t.Fatalf("MutateRows of 500 rows: errs %v, err %v", errs, err)
	}
	if rows := scan(t, s, "", "", storage.Filter{fam("n")}, 0); len(rows) != 500 {
		t.Fatalf("after MutateRows of 500 rows, scan found %d", len(rows))
	}
}
