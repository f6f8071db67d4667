package storagetest

import (
	"context"
	"errors"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// testDeferred: the deferred variants apply, publish and validate exactly
// as the plain calls (only their durability waits for the next durable
// write, which a test in one process cannot observe).
func testDeferred(t *testing.T, s storage.Store) {
	d, ok := s.(storage.Deferred)
	if !ok {
		t.Skip("store is not Deferred")
	}
	ctx := context.Background()
	pred := storage.Filter{{Family: "f", Qualifier: "q"}}
	put := []storage.Mutation{storage.SetCell("f", "q", 5, []byte("a"))}
	other := []storage.Mutation{storage.SetCell("f", "other", 5, []byte("b"))}
	matched, err := d.CheckAndMutateDeferred(ctx, []byte("r"), pred, other, put)
	if err != nil || matched {
		t.Fatalf("first deferred CheckAndMutate = %v, %v; want false, nil", matched, err)
	}
	matched, err = d.CheckAndMutateDeferred(ctx, []byte("r"), pred, other, put)
	if err != nil || !matched {
		t.Fatalf("second deferred CheckAndMutate = %v, %v; want true, nil", matched, err)
	}
	r, err := s.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "f", AllQualifiers: true}})
	if err != nil || len(r.Cells) != 2 {
		t.Fatalf("after deferred writes: %v, %v; want both cells visible", r.Cells, err)
	}
	errs, err := d.MutateRowsDeferred(ctx, []storage.RowMutation{
		{Row: []byte("a"), Mutations: put}, {Row: []byte("b"), Mutations: put}})
	if err != nil || errs != nil {
		t.Fatalf("MutateRowsDeferred = %v, %v", errs, err)
	}
	for _, row := range []string{"a", "b"} {
		if r, _ := s.ReadRow(ctx, []byte(row), pred); len(r.Cells) != 1 {
			t.Fatalf("row %s after MutateRowsDeferred: %v", row, r.Cells)
		}
	}
	if _, err := d.CheckAndMutateDeferred(ctx, nil, pred, nil, put); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("deferred write of an empty row: %v", err)
	}
	if _, err := d.MutateRowsDeferred(ctx, []storage.RowMutation{{Row: nil, Mutations: put}}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("deferred batch with an empty row: %v", err)
	}
}
