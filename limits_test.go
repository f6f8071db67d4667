package percolator_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestTxnTooLarge: through the API, a transaction's writes are bounded
// (Options.MaxTxnWrites, MaxTxnBytes): past them Set fails with
// ErrTxnTooLarge, and an Update whose function returns it writes nothing;
// negative limits are bad options.
func TestTxnTooLarge(t *testing.T) {
	ctx := context.Background()
	for _, o := range []percolator.Options{{MaxTxnWrites: -1}, {MaxTxnBytes: -5}} {
		if _, err := percolator.Open(ctx, o); !errors.Is(err, percolator.ErrInvalidArgument) {
			t.Errorf("Open(%+v): %v; want ErrInvalidArgument", o, err)
		}
	}
	db, err := percolator.Open(ctx, percolator.Options{MaxTxnWrites: 10, MaxTxnBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(ctx, func(tx *percolator.Txn) error {
		for i := range 11 {
			if err := tx.Set("r"+strconv.Itoa(i), "v", []byte("x")); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, percolator.ErrTxnTooLarge) || !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("11 writes with MaxTxnWrites 10: %v", err)
	}
	err = db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("big", "v", make([]byte, 2<<10)) })
	if !errors.Is(err, percolator.ErrTxnTooLarge) {
		t.Fatalf("2 KiB with MaxTxnBytes 1 KiB: %v", err)
	}
	err = db.View(ctx, func(tx *percolator.Txn) error {
		kvs, err := tx.Scan(ctx, "", "", "v", 0)
		if err == nil && len(kvs) != 0 {
			t.Errorf("the refused transactions wrote %d cells", len(kvs))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
