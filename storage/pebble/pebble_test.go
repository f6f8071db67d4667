package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

var ctx = context.Background()

func openTest(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store { return openTest(t, t.TempDir()) })
}

// TestConformanceFlushing reruns the suite on a store that flushes its
// memtable after every fourth write of its first flushEvery4 (every
// 64th after them), so that reads merge sstables, their bloom filters
// and the memtable, and deletes land on flushed versions.
func TestConformanceFlushing(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return &flushingStore{Store: openTest(t, t.TempDir())}
	})
}

type flushingStore struct {
	*Store
	writes atomic.Int64
}

// flushEvery4 is how many of a flushing store's first writes flush
// every fourth. The concurrent tests make thousands of writes: a flush
// after every fourth of them all left a read merging hundreds of level-0
// tables, and under the race detector (pebble's invariants record a
// stack trace for every table a read opens) one test took two minutes.
const flushEvery4 = 400

func (f *flushingStore) maybeFlush(err error) error {
	n := f.writes.Add(1)
	every := int64(4)
	if n > flushEvery4 {
		every = 64
	}
	if err != nil || n%every != 0 || f.guard.enter() != nil {
		return err
	}
	defer f.guard.exit()
	return f.db.Flush()
}

func (f *flushingStore) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	return f.maybeFlush(f.Store.Mutate(ctx, row, ms...))
}

func (f *flushingStore) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, t, e []storage.Mutation) (bool, error) {
	ok, err := f.Store.CheckAndMutate(ctx, row, p, t, e)
	return ok, f.maybeFlush(err)
}

func (f *flushingStore) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	n, err := f.Store.Increment(ctx, row, family, qualifier, delta)
	return n, f.maybeFlush(err)
}

func (f *flushingStore) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	errs, err := f.Store.MutateRows(ctx, rows)
	return errs, f.maybeFlush(err)
}

// TestReopen checks that every write that returned survives Close and
// Open, the family registry included (DeleteRow must still reach every
// family after a restart).
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	must(t, s.Mutate(ctx, []byte("r"), storage.SetCell("a", "q", 7, []byte("v")), storage.SetCell("notify", "", 1, nil)))
	must(t, s.Mutate(ctx, []byte("gone"), storage.SetCell("b", "q", 1, []byte("x"))))
	if _, err := s.Increment(ctx, []byte("r"), "ctr", "n", 41); err != nil {
		t.Fatal(err)
	}
	must(t, s.Close())

	s = openTest(t, dir)
	defer s.Close()
	all := storage.Filter{{Family: "a", AllQualifiers: true}, {Family: "ctr", AllQualifiers: true}, {Family: "notify", AllQualifiers: true}}
	r, err := s.ReadRow(ctx, []byte("r"), all)
	if err != nil || len(r.Cells) != 3 || string(r.Cells[0].Value) != "v" || r.Cells[2].Family != "notify" {
		t.Fatalf("after reopen: %+v, %v", r.Cells, err)
	}
	if n, err := s.Increment(ctx, []byte("r"), "ctr", "n", 1); err != nil || n != 42 {
		t.Fatalf("counter after reopen: %d, %v", n, err)
	}
	must(t, s.Mutate(ctx, []byte("gone"), storage.Mutation{Kind: storage.DeleteRow}))
	r, err = s.ReadRow(ctx, []byte("gone"), storage.Filter{{Family: "b", AllQualifiers: true}})
	if err != nil || len(r.Cells) != 0 {
		t.Fatalf("DeleteRow after reopen left %+v, %v", r.Cells, err)
	}
}

func TestSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of an open store: %v, want ErrLocked", err)
	}
	t.Logf("second Open: %v", err)
	must(t, s.Close())
	s = openTest(t, dir) // the lock is released by Close
	must(t, s.Close())
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{CacheSize: -1}, {MemTableSize: 1 << 40}, {SyncDelay: time.Second}} {
		if _, err := Open(filepath.Join(t.TempDir(), "x"), o); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("Open with %+v: %v, want ErrInvalidArgument", o, err)
		}
	}
	var o Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil || o.CacheSize != DefaultCacheSize || o.Logger == nil || o.SyncDelay != DefaultSyncDelay {
		t.Fatalf("defaults %+v: %v", o, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestScanCountsTombstones: the keys a scan visits include the tombstones
// of deleted cells until CompactFamily drops them, so the count shows the
// cost a scan really pays.
func TestScanCountsTombstones(t *testing.T) {
	s := openTest(t, t.TempDir())
	const n = 500
	putAndDelete(t, s, n)
	if v := scannedKeys(t, s); v < n {
		t.Fatalf("scan over %d tombstones visited %d keys", n, v)
	}
	if err := s.CompactFamily(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	if v := scannedKeys(t, s); v > 0 {
		t.Fatalf("after CompactFamily the scan visited %d keys", v)
	}
}

// TestCompactFamilyDeepLSM: in a store big enough that pebble's base level
// is above the bottom (144 MiB flushed, not yet compacted), the table of
// tombstones is moved, not rewritten, into the base level and keeps them;
// CompactFamily must push it down until they are dropped.
func TestCompactFamilyDeepLSM(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 144 MiB")
	}
	s := openTest(t, t.TempDir())
	rng := rand.NewChaCha8([32]byte{7})
	value := make([]byte, 4096)
	for b := range 36 { // 36 x 1024 x 4 KiB = 144 MiB, incompressible
		rows := make([]storage.RowMutation, 1024)
		for i := range rows {
			_, _ = rng.Read(value)
			rows[i] = storage.RowMutation{Row: []byte(fmt.Sprintf("big%02d%04d", b, i)), Mutations: []storage.Mutation{storage.SetCell("data", "q", 1, value)}}
		}
		if errs, err := s.MutateRows(ctx, rows); err != nil || errs != nil {
			t.Fatal(err, errs)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	putAndDelete(t, s, 2000)
	if err := s.CompactFamily(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	if v := scannedKeys(t, s); v > 0 {
		t.Fatalf("after CompactFamily in a deep LSM the scan visited %d keys:\n%s", v, s.db.Metrics())
	}
}

// putAndDelete writes and then deletes one cell of family "n" in each of
// n rows, leaving n tombstones.
func putAndDelete(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		row := []byte(fmt.Sprintf("r%04d", i))
		if err := s.Mutate(ctx, row, storage.SetCell("n", "q", 1, []byte("v"))); err != nil {
			t.Fatal(err)
		}
		if err := s.Mutate(ctx, row, storage.DeleteCell("n", "q", 1)); err != nil {
			t.Fatal(err)
		}
	}
}

// scannedKeys scans family "n", which must deliver nothing, and returns
// the keys the scan visited.
func scannedKeys(t *testing.T, s *Store) uint64 {
	t.Helper()
	v, err := s.ScanCounted(ctx, nil, nil, storage.Filter{{Family: "n", AllQualifiers: true}}, 0, func(storage.Row) bool {
		t.Fatal("a deleted cell was delivered")
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNewStoreSurvivesPowerCut: a store created in new directories keeps
// a durable write across a power cut that discards everything unsynced,
// directory entries included (pebble syncs only the store directory's own
// entry; Open syncs the parents it creates).
func TestNewStoreSurvivesPowerCut(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open("/a/b/store", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", 1, []byte("v"))); err != nil {
		t.Fatal(err)
	}
	cut := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()
	s, err = Open("/a/b/store", Options{FS: cut, MustExist: true})
	if err != nil {
		t.Fatalf("after the power cut: %v", err)
	}
	defer s.Close()
	row, err := s.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "f", Qualifier: "q"}})
	if err != nil || len(row.Cells) != 1 {
		t.Fatalf("the acknowledged write is gone: %v, %v", row, err)
	}
}
