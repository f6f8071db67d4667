package percolator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestLeaseLostMatchesInUse: once the DB's store allocator has lost its
// lease (another allocator took it), every Begin fails with ErrInUse (it
// used to match no API sentinel).
func TestLeaseLostMatchesInUse(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	db, err := percolator.Open(ctx, percolator.Options{Store: st, LockTTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Another allocator takes the lease: bump the lease cell's epoch.
	r, err := st.ReadRow(ctx, oracle.StoreMarkRow(), storage.Filter{{Family: oracle.FamilyOracle, Qualifier: "lease"}})
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("lease cell: %+v %v", r.Cells, err)
	}
	c := r.Cells[0]
	if err := st.Mutate(ctx, oracle.StoreMarkRow(), storage.SetCell(oracle.FamilyOracle, "lease", c.TS+1, c.Value), storage.DeleteCell(oracle.FamilyOracle, "lease", c.TS)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // a renewal (every TTL/3) finds the lease taken
	_, err = db.Begin(ctx)
	if err == nil {
		t.Fatal("Begin after the lease was lost succeeded")
	}
	for _, s := range []error{percolator.ErrInUse} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("Begin after the lease was lost: %q, want ErrInUse", err)
}
