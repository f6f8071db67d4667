package percolator_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage/pebble/faultfs"
)

// TestGCOnFullDisk: a server whose disk fills up (a filesystem with a
// quota that fails writes with ENOSPC) refuses its clients' writes with
// ErrNoSpace before the disk is full, without failing; garbage
// collection, which needs log space to free space, still runs (over the
// reserve the store kept), and once it freed space the clients' writes
// are accepted again, with every committed value intact.
func TestGCOnFullDisk(t *testing.T) {
	ctx := context.Background()
	q := faultfs.NewQuota(vfs.NewMem(), 40<<20)
	srv := servertest.Start(t, server.Options{FS: q, DiskReserve: 4 << 20, MemTableSize: 1 << 20, GCLifetime: 20 * time.Millisecond, DisableGC: true}, "")
	db := open(t, percolator.Options{Server: srv.Addr})
	const rows = 8
	last := map[string][]byte{}
	write := func() error {
		vals := map[string][]byte{}
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			for i := range rows {
				row, v := fmt.Sprintf("r%d", i), make([]byte, 64<<10)
				_, _ = rand.Read(v) // incompressible
				vals[row] = v
				if err := tx.Set(row, "v", v); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for row, v := range vals {
				last[row] = v
			}
		}
		return err
	}
	var err error
	n := 0
	for ; n < 4000 && err == nil; n++ {
		err = write()
	}
	if !errors.Is(err, percolator.ErrNoSpace) {
		t.Fatalf("after %d transactions: %v; want ErrNoSpace", n, err)
	}
	t.Logf("refused after %d transactions (%d MiB used): %v", n, q.Used()>>20, err)
	res, err := db.GC(ctx)
	if err != nil || res.Versions == 0 {
		t.Fatalf("GC on a full disk: %+v, %v", res, err)
	}
	t.Logf("GC removed %d versions; %d MiB used", res.Versions, q.Used()>>20)
	// The server reads the free space again within a second.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := write()
		if err == nil {
			break
		}
		if !errors.Is(err, percolator.ErrNoSpace) || time.Now().After(deadline) {
			t.Fatalf("writing after GC: %v", err)
		}
	}
	if err := db.View(ctx, func(tx *percolator.Txn) error {
		for row, want := range last {
			v, err := tx.Get(ctx, row, "v")
			if err != nil || string(v) != string(want) {
				return fmt.Errorf("%s: %d bytes, %v; want the last committed value", row, len(v), err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
