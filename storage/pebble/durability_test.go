package pebble

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble/faultfs"
)

var errInjectedSync = errors.New("injected fsync failure")

// heldWrite opens a store on a crashable filesystem, writes v1 to row r
// durably, then holds the WAL's syncs and starts a durable write of v2 to
// r, returning once v2 is published to pebble's readers (but not synced).
// done receives the write's result.
func heldWrite(t *testing.T) (s *Store, mem *vfs.MemFS, ffs *faultfs.FS, done chan error) {
	t.Helper()
	mem = vfs.NewCrashableMem()
	ffs = faultfs.New(mem)
	s, err := Open("/db", Options{FS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", 1, []byte("v1"))); err != nil {
		t.Fatal(err)
	}
	ffs.Hold()
	done = make(chan error, 1)
	go func() { done <- s.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", 1, []byte("v2"))) }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ffs.AwaitHeld(wctx, 1); err != nil {
		t.Fatal(err)
	}
	for { // published: a raw pebble read sees v2 while its sync is held
		v, closer, err := s.db.Get(appendKey(nil, "f", []byte("r"), "q", 1))
		if err == nil {
			seen := string(v) == "v2"
			closer.Close()
			if seen {
				return s, mem, ffs, done
			}
		}
		if wctx.Err() != nil {
			t.Fatal("the held write never became visible to pebble's readers")
		}
		time.Sleep(time.Millisecond)
	}
}

// reads runs every read path of the store on row r concurrently and
// reports each one's value (or error) and whether it returned before
// released was closed.
func reads(s *Store, released <-chan struct{}) <-chan string {
	out := make(chan string, 3)
	report := func(path string, v []byte, err error) {
		early := false
		select {
		case <-released:
		default:
			early = true
		}
		out <- fmt.Sprintf("%s: %q err=%v early=%v", path, v, err, early)
	}
	var wg sync.WaitGroup
	f := storage.Filter{{Family: "f", Qualifier: "q"}}
	wg.Add(3)
	go func() {
		defer wg.Done()
		r, err := s.ReadRow(ctx, []byte("r"), f)
		report("ReadRow", cellValue(r), err)
	}()
	go func() {
		defer wg.Done()
		r, err := s.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "f", Qualifier: "q", Time: storage.At(1)}})
		report("ReadRow(point)", cellValue(r), err)
	}()
	go func() {
		defer wg.Done()
		var v []byte
		err := s.Scan(ctx, nil, nil, f, 0, func(r storage.Row) bool { v = cellValue(r); return true })
		report("Scan", v, err)
	}()
	go func() { wg.Wait(); close(out) }()
	return out
}

func cellValue(r storage.Row) []byte {
	if len(r.Cells) == 0 {
		return nil
	}
	return r.Cells[0].Value
}

// TestReadWaitsForSync: pebble publishes a synced batch before its log
// sync returns. No read may return it before then: a power cut at that
// moment (CrashClone of what was synced) brings back the old value, so a
// reader would have seen a write that never happened.
func TestReadWaitsForSync(t *testing.T) {
	s, mem, ffs, done := heldWrite(t)
	defer s.Close()
	released := make(chan struct{})
	out := reads(s, released)
	time.Sleep(20 * time.Millisecond) // let the reads reach the store
	after := reopenClone(t, mem, vfs.CrashCloneCfg{})
	if got := readValue(t, after); got != "v1" {
		t.Fatalf("after a power cut with the sync held: %q, want v1", got)
	}
	close(released)
	ffs.Release(nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for line := range out {
		if !strings.HasSuffix(line, `: "v2" err=<nil> early=false`) {
			t.Errorf("%s (want v2, returned after the sync)", line)
		}
	}
}

// TestFailedSyncFailsStore: a durable write whose sync fails is not
// reported durable, and the store fails (storage.ErrFailed) instead of
// letting the reads that saw it in memory return it; recovery keeps the
// old value.
func TestFailedSyncFailsStore(t *testing.T) {
	s, mem, ffs, done := heldWrite(t)
	defer s.Close()
	released := make(chan struct{})
	out := reads(s, released)
	time.Sleep(20 * time.Millisecond)
	close(released)
	ffs.Release(errInjectedSync)
	if err := <-done; !errors.Is(err, storage.ErrFailed) {
		t.Fatalf("write whose sync failed returned %v, want ErrFailed", err)
	}
	for line := range out {
		if want := "err=" + s.guard.failure().Error(); !strings.Contains(line, want) && !strings.HasSuffix(line, `"v1" err=<nil> early=true`) {
			t.Errorf("%s: want the store's failure (or v1, read before the write)", line)
		}
	}
	for name, call := range map[string]func() error{
		"ReadRow": func() error {
			_, err := s.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "f", Qualifier: "q"}})
			return err
		},
		"Mutate": func() error { return s.Mutate(ctx, []byte("x"), storage.SetCell("f", "q", 1, nil)) },
		"MutateRowsDeferred": func() error {
			_, err := s.MutateRowsDeferred(ctx, []storage.RowMutation{{Row: []byte("x"), Mutations: []storage.Mutation{storage.SetCell("f", "q", 1, nil)}}})
			return err
		},
	} {
		if err := call(); !errors.Is(err, storage.ErrFailed) {
			t.Errorf("%s on a failed store: %v, want ErrFailed", name, err)
		}
	}
	if got := readValue(t, reopenClone(t, mem, vfs.CrashCloneCfg{})); got != "v1" {
		t.Fatalf("after recovery: %q, want v1", got)
	}
}

// reopenClone opens the store in a crash clone of mem: the state a power
// cut would leave now.
func reopenClone(t *testing.T, mem *vfs.MemFS, cfg vfs.CrashCloneCfg) *Store {
	t.Helper()
	s, err := Open("/db", Options{FS: mem.CrashClone(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func readValue(t *testing.T, s *Store) string {
	t.Helper()
	r, err := s.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "f", Qualifier: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	return string(cellValue(r))
}

// TestScanWaitsForAHeldDelete: a scan must not miss a row whose selected
// cells a durable delete in flight removed: a power cut before that
// delete's sync brings them back. So the scan waits for the sync (and
// gives up with its context), while a scan selecting nothing the delete
// touched returns at once.
func TestScanWaitsForAHeldDelete(t *testing.T) {
	mem := vfs.NewCrashableMem()
	ffs := faultfs.New(mem)
	s, err := Open("/db", Options{FS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := []byte("x")
	if err := s.Mutate(ctx, x, storage.SetCell("f", "q", 1, []byte("v")), storage.SetCell("g", "q", 1, []byte("w"))); err != nil {
		t.Fatal(err)
	}
	ffs.Hold()
	released := false
	defer func() {
		if !released {
			ffs.Release(nil)
		}
	}()
	done := make(chan error, 1)
	go func() {
		done <- s.Mutate(ctx, x, storage.Mutation{Kind: storage.DeleteCells, Family: "f", Qualifier: "q"})
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ffs.AwaitHeld(wctx, 1); err != nil {
		t.Fatal(err)
	}
	for { // published: pebble's readers no longer see the cell
		_, closer, err := s.db.Get(appendKey(nil, "f", x, "q", 1))
		if err != nil {
			break
		}
		closer.Close()
		if wctx.Err() != nil {
			t.Fatal("the held delete never became visible to pebble's readers")
		}
		time.Sleep(time.Millisecond)
	}
	var rows int
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	err = s.Scan(sctx, nil, nil, storage.Filter{{Family: "f", Qualifier: "q"}}, 0, func(storage.Row) bool { rows++; return true })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a scan of the deleted column while its delete's sync is held: %d rows, %v; want its deadline's error", rows, err)
	}
	rows = 0
	if err := s.Scan(wctx, nil, nil, storage.Filter{{Family: "g", Qualifier: "q"}}, 0, func(storage.Row) bool { rows++; return true }); err != nil || rows != 1 {
		t.Fatalf("a scan of another family: %d rows, %v; want 1 at once", rows, err)
	}
	after := reopenClone(t, mem, vfs.CrashCloneCfg{})
	if got, err := after.ReadRow(ctx, x, storage.Filter{{Family: "f", Qualifier: "q"}}); err != nil || len(got.Cells) != 1 {
		t.Fatalf("after a power cut with the delete's sync held: %v, %v; want the cell back", got.Cells, err)
	}
	released = true
	ffs.Release(nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rows = 0
	if err := s.Scan(wctx, nil, nil, storage.Filter{{Family: "f", Qualifier: "q"}}, 0, func(storage.Row) bool { rows++; return true }); err != nil || rows != 0 {
		t.Fatalf("a scan once the delete is durable: %d rows, %v; want none", rows, err)
	}
}
