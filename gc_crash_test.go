package percolator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// TestGCPowerCut cuts the power in the middle of a garbage collection
// pass (vfs.MemFS.CrashClone, keeping none, some or all unsynced data):
// on the store the cut leaves, every row reads its newest value, and the
// next pass finishes the collection (one write record left per cell).
func TestGCPowerCut(t *testing.T) {
	const rows, versions = 300, 3 // more rows than one batch of a pass (256)
	for _, pct := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced-kept-%d%%", pct), func(t *testing.T) {
			ctx := context.Background()
			mem := vfs.NewCrashableMem()
			open := func(fs vfs.FS) (*pebble.Store, *percolator.DB) {
				t.Helper()
				st, err := pebble.Open("/db", pebble.Options{FS: fs, Logger: quiet()})
				if err != nil {
					t.Fatal(err)
				}
				db, err := percolator.Open(ctx, percolator.Options{Store: st, Logger: quiet(), GCLifetime: 20 * time.Millisecond, DisableGC: true})
				if err != nil {
					t.Fatal(err)
				}
				return st, db
			}
			st, db := open(mem)
			for v := range versions {
				for lo := 0; lo < rows; lo += 100 {
					if err := db.Update(ctx, func(tx *percolator.Txn) error {
						for i := lo; i < min(lo+100, rows); i++ {
							if err := tx.Set(fmt.Sprintf("r%04d", i), "v", []byte(fmt.Sprint(v))); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Cut the power once the pass has collected its first batch.
			var once sync.Once
			var clone *vfs.MemFS
			rng := rand.New(rand.NewPCG(uint64(pct), 7))
			_, err := db.GCWith(ctx, percolator.GCOptions{Progress: func(rows, versions, bytes int) {
				once.Do(func() {
					clone = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rng})
				})
			}})
			if err != nil {
				t.Fatal(err)
			}
			_ = db.Close()
			_ = st.Close()

			st, db = open(clone)
			defer st.Close()
			defer db.Close()
			want := fmt.Sprint(versions - 1)
			check := func(when string) {
				t.Helper()
				err := db.View(ctx, func(tx *percolator.Txn) error {
					kvs, err := tx.Scan(ctx, "", "", "v", 0)
					if err != nil {
						return err
					}
					if len(kvs) != rows {
						return fmt.Errorf("%d rows, want %d", len(kvs), rows)
					}
					for _, kv := range kvs {
						if string(kv.Value) != want {
							return fmt.Errorf("row %s reads %q, want %q", kv.Row, kv.Value, want)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
			}
			check("after the power cut")
			res, err := db.GC(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check("after the next pass")
			left := 0
			err = st.Scan(ctx, nil, []byte(storage.ReservedPrefix), storage.Filter{{Family: txn.FamilyWrite, AllQualifiers: true}}, 0, func(r storage.Row) bool {
				left += len(r.Cells)
				return true
			})
			if err != nil || left != rows {
				t.Fatalf("after the next pass (%+v): %d write records left, want %d (%v)", res, left, rows, err)
			}
		})
	}
}
