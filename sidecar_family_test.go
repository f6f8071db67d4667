package percolator_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/lock"
)

// TestSidecarFamiliesApart: the lock package keeps its rows in the DB's
// store beside the transactions' rows. Its cells must not look like the
// protocol's (a lock-family cell would be taken for a transaction's lock:
// reopening the DB rebuilds the lock index from that family), and a user
// row of the same name must not see them.
func TestSidecarFamiliesApart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lock.New(db.Store(), lock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.Acquire(ctx, "x", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatalf("reopen after a lock was held: %v", err)
	}
	defer db.Close()
	for _, col := range []string{"h", "t", "k"} {
		if err := db.Update(ctx, func(tx *percolator.Txn) error {
			return tx.Set("lock/x", col, []byte("v"))
		}); err != nil {
			t.Fatalf("write lock/x:%s: %v", col, err)
		}
	}
}
