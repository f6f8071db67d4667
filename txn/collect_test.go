package txn

import (
	"context"
	"errors"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// commitValue commits row/col = v through client name and returns the
// transaction's start_ts.
func commitValue(t *testing.T, e *env, name, row, col, v string) uint64 {
	t.Helper()
	tx, err := e.client(name).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set(row, col, []byte(v)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tx.StartTS()
}

// versions lists row's cells of family, by column and timestamp.
func versions(t *testing.T, e *env, row, family string) []storage.Cell {
	t.Helper()
	r, err := e.store.ReadRow(context.Background(), []byte(row), storage.Filter{{Family: family, AllQualifiers: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Cells
}

// TestCollectRow: below the safe point a row keeps, per column, its
// newest commit record and the data it points to, and loses the older
// records, their data and the rollback records; snapshots at and above
// the safe point read what they read before; the row's fence refuses a
// prewrite below the safe point.
func TestCollectRow(t *testing.T) {
	for _, backend := range []string{"indexed", "shared"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, backend == "indexed")
			late, _ := e.client("late").Begin(ctx) // begun below the safe point
			commitValue(t, e, "w", "r", "v", "1")
			commitValue(t, e, "w", "r", "v", "2")
			rolledBack, _ := e.client("w").Begin(ctx)
			if err := e.store.Mutate(ctx, []byte("r"), storage.SetCell(FamilyWrite, "v", rolledBack.StartTS(), encodeWrite(&Write{Op: OpRollback, StartTS: rolledBack.StartTS()}))); err != nil {
				t.Fatal(err)
			}
			reader, _ := e.client("reader").Begin(ctx)
			sp := reader.StartTS()
			commitValue(t, e, "w", "r", "v", "3")
			if n := len(versions(t, e, "r", FamilyWrite)); n != 4 {
				t.Fatalf("%d write records before, want 4", n)
			}

			got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp)
			if err != nil {
				t.Fatal(err)
			}
			// Removed: the commit record of "1" and its data, the rollback
			// record.
			if got.Versions != 3 || got.Bytes == 0 {
				t.Fatalf("collected %+v, want 3 versions", got)
			}
			if n, d := len(versions(t, e, "r", FamilyWrite)), len(versions(t, e, "r", FamilyData)); n != 2 || d != 2 {
				t.Fatalf("after: %d write records, %d data versions; want 2 and 2", n, d)
			}
			if v, err := reader.Get(ctx, "r", "v"); err != nil || string(v) != "2" {
				t.Fatalf("the snapshot at the safe point reads %q, %v; want 2", v, err)
			}
			now, _ := e.client("reader").Begin(ctx)
			if v, err := now.Get(ctx, "r", "v"); err != nil || string(v) != "3" {
				t.Fatalf("a new snapshot reads %q, %v; want 3", v, err)
			}
			// A prewrite below the safe point, of a column never written:
			// only the fence stops it.
			_ = late.Set("r", "untouched", []byte("x"))
			if err := late.Commit(ctx); !errors.Is(err, ErrConflict) {
				t.Fatalf("a commit begun below the safe point: %v; want a conflict on the fence", err)
			}
			// Again: the refused commit's abort left a rollback record
			// below the fence, which goes; then nothing is left to remove.
			if got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp); err != nil || got.Versions != 1 {
				t.Fatalf("collecting again: %+v, %v; want the refused commit's rollback record", got, err)
			}
			if got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp); err != nil || got.Versions != 0 {
				t.Fatalf("collecting a third time: %+v, %v", got, err)
			}
		})
	}
}

// TestCollectRowLocks: a live owner's lock below the safe point leaves
// the row untouched (ErrRowLocked); once its owner is dead the lock is
// resolved and the row collected.
func TestCollectRowLocks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	commitValue(t, e, "w", "r", "v", "1")
	commitValue(t, e, "w", "r", "v", "2")
	stuck := e.client("stuck")
	tx, _ := stuck.Begin(ctx)
	_ = tx.Set("r", "v", []byte("never"))
	stuck.crash = func(point string) bool { return point == crashAfterPrimaryPrewrite }
	_ = tx.Commit(ctx)
	reader, _ := e.client("reader").Begin(ctx)
	sp := reader.StartTS()
	before := len(versions(t, e, "r", FamilyWrite))
	if _, err := e.client("gc").CollectRow(ctx, []byte("r"), sp); !errors.Is(err, ErrRowLocked) {
		t.Fatalf("a live lock below the safe point: %v; want ErrRowLocked", err)
	}
	if n := len(versions(t, e, "r", FamilyWrite)); n != before {
		t.Fatalf("the locked row lost write records: %d, had %d", n, before)
	}
	e.live.Unregister("stuck")
	got, err := e.client("gc").CollectRow(ctx, []byte("r"), sp)
	if err != nil || got.Versions == 0 {
		t.Fatalf("after the owner died: %+v, %v", got, err)
	}
	if len(versions(t, e, "r", FamilyLock)) != 0 {
		t.Fatal("the dead owner's lock is still there")
	}
	if v, err := reader.Get(ctx, "r", "v"); err != nil || string(v) != "2" {
		t.Fatalf("the snapshot at the safe point reads %q, %v; want 2", v, err)
	}
}
