package percolator_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/graph"
	"github.com/seed-992972ee/percolator/lock"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/queue"
	"github.com/seed-992972ee/percolator/txn"
)

// TestSidecarFamiliesApart: the lock and queue packages keep their rows
// in the DB's store beside the transactions' rows. Its cells must not look like the
// protocol's (a lock-family cell would be taken for a transaction's lock:
// reopening the DB rebuilds the lock index from that family), and a user
// row of the same name must not see them.
func TestSidecarFamiliesApart(t *testing.T) {
	for _, f := range []string{lock.Family, queue.Family, graph.Family} {
		for _, p := range []string{txn.FamilyData, txn.FamilyLock, txn.FamilyWrite, txn.FamilyNotify, oracle.FamilyOracle} {
			if f == p {
				t.Fatalf("family %q is both a package's and the protocol's", f)
			}
		}
	}
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
	q, err := queue.New(db.Store(), queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, "x", []byte("item")); err != nil {
		t.Fatal(err)
	}
	if _, err := q.TryPop(ctx, "x", time.Minute); err != nil {
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
	for _, row := range []string{"lock/x", "queue/x\x00c"} {
		for _, col := range []string{"h", "t", "k", "s", "b", "p"} {
			if err := db.Update(ctx, func(tx *percolator.Txn) error {
				return tx.Set(row, col, []byte("v"))
			}); err != nil {
				t.Fatalf("write %q:%s: %v", row, col, err)
			}
		}
	}
}
