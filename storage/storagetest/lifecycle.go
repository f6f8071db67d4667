package storagetest

import (
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// testCopies checks that the store never shares a slice with its caller.
func testCopies(t *testing.T, s storage.Store) {
	v := []byte("value")
	row := []byte("row")
	if err := s.Mutate(ctx, row, storage.SetCell("a", "q", 1, v)); err != nil {
		t.Fatal(err)
	}
	copy(v, "XXXXX")
	copy(row, "XXX")
	expectCells(t, "after changing the slices given to Mutate", read(t, s, "row", storage.Filter{fam("a")}), versions("a", "q", "value", 1))

	r, err := s.ReadRow(ctx, []byte("row"), storage.Filter{fam("a")})
	if err != nil {
		t.Fatal(err)
	}
	copy(r.Cells[0].Value, "XXXXX")
	copy(r.Key, "XXX")
	expectCells(t, "after changing a read's slices", read(t, s, "row", storage.Filter{fam("a")}), versions("a", "q", "value", 1))

	_ = s.Scan(ctx, nil, nil, storage.Filter{fam("a")}, 0, func(r storage.Row) bool {
		copy(r.Cells[0].Value, "XXXXX")
		copy(r.Key, "XXX")
		return true
	})
	expectCells(t, "after changing a scan's slices", read(t, s, "row", storage.Filter{fam("a")}), versions("a", "q", "value", 1))

	v2 := []byte("cam")
	checkAndMutate(t, s, "row", nil, nil, []storage.Mutation{storage.SetCell("a", "c", 1, v2)})
	copy(v2, "XXX")
	v3 := []byte("rows")
	if b, ok := s.(storage.Batcher); ok {
		if _, err := b.MutateRows(ctx, []storage.RowMutation{{Row: []byte("row"), Mutations: []storage.Mutation{storage.SetCell("a", "m", 1, v3)}}}); err != nil {
			t.Fatal(err)
		}
		copy(v3, "XXXX")
	} else {
		put(t, s, "row", set("a", "m", 1, "rows"))
	}
	expectCells(t, "after changing the values given to CheckAndMutate and MutateRows", read(t, s, "row", storage.Filter{fam("a")}),
		[]storage.Cell{cell("a", "c", 1, "cam"), cell("a", "m", 1, "rows"), cell("a", "q", 1, "value")})
}

func testClosed(t *testing.T, s storage.Store) {
	put(t, s, "r", set("a", "q", 1, "v"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.ReadRow(ctx, []byte("r"), storage.Filter{fam("a")})
	expectErr(t, "ReadRow", err, storage.ErrClosed)
	err = s.Scan(ctx, nil, nil, storage.Filter{fam("a")}, 0, func(storage.Row) bool {
		t.Error("Scan called fn on a closed store")
		return true
	})
	expectErr(t, "Scan", err, storage.ErrClosed)
	expectErr(t, "Mutate", s.Mutate(ctx, []byte("r"), good), storage.ErrClosed)
	_, err = s.CheckAndMutate(ctx, []byte("r"), nil, nil, []storage.Mutation{good})
	expectErr(t, "CheckAndMutate", err, storage.ErrClosed)
	_, err = s.Increment(ctx, []byte("r"), "a", "n", 1)
	expectErr(t, "Increment", err, storage.ErrClosed)
	if b, ok := s.(storage.Batcher); ok {
		_, err = b.MutateRows(ctx, []storage.RowMutation{{Row: []byte("r"), Mutations: []storage.Mutation{good}}})
		expectErr(t, "MutateRows", err, storage.ErrClosed)
	}
	if c, ok := s.(storage.Clock); ok {
		_, err = c.Now(ctx)
		expectErr(t, "Now", err, storage.ErrClosed)
	}
	expectErr(t, "second Close", s.Close(), storage.ErrClosed)
}
