package percolator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/txn"
)

// TestSnapshotTooOldOverServer: a client of a server learns the safe
// point from the server (it may not read the reserved row that holds it):
// a transaction begun below it fails its reads with ErrSnapshotTooOld; one
// begun above it reads.
func TestSnapshotTooOldOverServer(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{}, "")
	db := open(t, percolator.Options{Server: srv.Addr})
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r", "v", []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	old, err := db.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.AdvanceSafePoint(ctx, srv.Store(), old.StartTS()+1); err != nil {
		t.Fatal(err)
	}
	// db has read nothing yet: its first read asks the server.
	if _, err := old.Get(ctx, "r", "v"); !errors.Is(err, percolator.ErrSnapshotTooOld) {
		t.Fatalf("a read below the safe point over a server: %v; want ErrSnapshotTooOld", err)
	}
	if got := get(t, db, "r"); got != "1" {
		t.Fatalf("a transaction above the safe point reads %q", got)
	}
}
