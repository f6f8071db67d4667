package percolator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

func set(t *testing.T, db *percolator.DB, row, val string) {
	t.Helper()
	if err := db.Update(context.Background(), func(tx *percolator.Txn) error { return tx.Set(row, "v", []byte(val)) }); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, db *percolator.DB, row string) string {
	t.Helper()
	var v []byte
	err := db.View(context.Background(), func(tx *percolator.Txn) (err error) { v, err = tx.Get(context.Background(), row, "v"); return err })
	if err != nil {
		t.Fatalf("Get %s: %v", row, err)
	}
	return string(v)
}

// TestStoreKeepsTimestamps: a DB on Options.Store without Options.Oracle
// resumes timestamps above everything the store holds, across DB reopens
// and store reopens, so a write after a reopen is visible (it used to
// restart at 1 and commit below the existing commits).
func TestStoreKeepsTimestamps(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"v1", "v2", "v3"} {
		db := open(t, percolator.Options{Store: st})
		if i > 0 {
			if got := get(t, db, "r"); got != []string{"v1", "v2", "v3"}[i-1] {
				t.Fatalf("reopen %d reads %q", i, got)
			}
		}
		set(t, db, "r", v)
		if got := get(t, db, "r"); got != v {
			t.Fatalf("after writing %s, reads %q: the write committed below an older commit", v, got)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := open(t, percolator.Options{Store: st})
	set(t, db, "r", "v4")
	if got := get(t, db, "r"); got != "v4" {
		t.Fatalf("after a store reopen: %q", got)
	}
	_ = ctx
}

// TestLostMarkRecovered: a store whose oracle mark was deleted resumes
// above the newest timestamp its data holds, never at 1.
func TestLostMarkRecovered(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	defer st.Close()
	db := open(t, percolator.Options{Store: st})
	for range 5 {
		set(t, db, "r", "old")
	}
	set(t, db, "r", "newest")
	_ = db.Close()
	if err := st.Mutate(ctx, oracle.StoreMarkRow(), storage.Mutation{Kind: storage.DeleteRow}); err != nil {
		t.Fatal(err)
	}
	db = open(t, percolator.Options{Store: st, MaxAttempts: 3}) // restarting at 1 would conflict again and again
	set(t, db, "r", "after")
	_ = db.Close()
	db = open(t, percolator.Options{Store: st})
	if got := get(t, db, "r"); got != "after" {
		t.Fatalf("after losing the mark and reopening: %q (the write committed below older commits)", got)
	}
}

// TestSecondDBOnExclusiveStore: one client per exclusive store. A second
// DB on it fails with ErrInUse (it used to steal the apply hook, leaving
// the first DB's index stale), the first keeps working, and once it is
// closed the second opens.
func TestSecondDBOnExclusiveStore(t *testing.T) {
	st := memory.New()
	defer st.Close()
	a := open(t, percolator.Options{Store: st})
	set(t, a, "r", "a1")
	_, err := percolator.Open(context.Background(), percolator.Options{Store: st})
	if !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("second DB on an exclusive store: %v, want ErrInUse", err)
	}
	set(t, a, "r", "a2")
	if got := get(t, a, "r"); got != "a2" {
		t.Fatalf("first DB after the refused second: %q", got)
	}
	_ = a.Close()
	b := open(t, percolator.Options{Store: st})
	if got := get(t, b, "r"); got != "a2" {
		t.Fatalf("second DB after the first closed: %q", got)
	}
	set(t, b, "r", "b1")
	if got := get(t, b, "r"); got != "b1" {
		t.Fatalf("second DB's write: %q", got)
	}
}

// TestSecondDBOnSharedStoreNeedsOracle: on a store shared by processes,
// two DBs each with its own allocator would hand out overlapping
// timestamps; the second is refused while the first holds the store's
// oracle lease, and both open with a shared oracle.
func TestSecondDBOnSharedStoreNeedsOracle(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	a := open(t, percolator.Options{Store: storagetest.SharedStore{Store: mem}})
	set(t, a, "r", "a")
	_, err := percolator.Open(ctx, percolator.Options{Store: storagetest.SharedStore{Store: mem}})
	if !errors.Is(err, storage.ErrInUse) || !strings.Contains(err.Error(), "oracle") {
		t.Fatalf("second DB without a shared oracle: %v, want ErrInUse naming the oracle", err)
	}
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shared := oracle.NewClient(alloc)
	_ = a.Close()
	a = open(t, percolator.Options{Store: storagetest.SharedStore{Store: mem}, Oracle: shared})
	b := open(t, percolator.Options{Store: storagetest.SharedStore{Store: mem}, Oracle: shared})
	set(t, a, "r", "a2")
	if got := get(t, b, "r"); got != "a2" {
		t.Fatalf("b reads %q after a's write", got)
	}
}

// holdCommit blocks the primary commit (a durable CheckAndMutate writing a
// commit record) of the process that uses it, until released.
type holdCommit struct {
	storagetest.SharedStore
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (h *holdCommit) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if len(ifTrue) > 0 && ifTrue[0].Family == "write" && len(p) == 1 && p[0].Family == "lock" {
		h.once.Do(func() { close(h.reached); <-h.release })
	}
	return h.SharedStore.CheckAndMutate(ctx, row, p, ifTrue, ifFalse)
}

// CheckAndMutateUnless implements storage.Unlessed: on a shared store the
// commit point goes through it (no push at or above commit_ts).
func (h *holdCommit) CheckAndMutateUnless(ctx context.Context, row []byte, p, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if len(ifTrue) > 0 && ifTrue[0].Family == "write" && len(p) == 1 && p[0].Family == "lock" {
		h.once.Do(func() { close(h.reached); <-h.release })
	}
	return h.SharedStore.CheckAndMutateUnless(ctx, row, p, unless, ifTrue, ifFalse)
}

// TestSharedStoreLivenessIsTTL: on a shared store without a liveness
// service, a DB must not judge another process's owner dead (it used to,
// at once, rolling back a live transaction 0.3 ms after it started): a
// reader that meets the live lock waits, and the writer commits.
func TestSharedStoreLivenessIsTTL(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	defer mem.Close()
	alloc, _ := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	shared := oracle.NewClient(alloc)
	h := &holdCommit{SharedStore: storagetest.SharedStore{Store: mem}, reached: make(chan struct{}), release: make(chan struct{})}
	writer := open(t, percolator.Options{Store: h, Oracle: shared})
	reader := open(t, percolator.Options{Store: storagetest.SharedStore{Store: mem}, Oracle: shared})
	done := make(chan error, 1)
	go func() {
		done <- writer.Update(ctx, func(tx *percolator.Txn) error {
			_ = tx.Set("p", "v", []byte("1"))
			return tx.Set("s", "v", []byte("1"))
		})
	}()
	<-h.reached // both locks written, the commit point not yet
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := reader.View(rctx, func(tx *percolator.Txn) error { _, err := tx.Get(rctx, "s", "v"); return err })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reader meeting a live lock of another process: %v, want it to wait (deadline)", err)
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatalf("the writer's commit: %v (its live transaction was rolled back)", err)
	}
	if got := get(t, reader, "s"); got != "1" {
		t.Fatalf("reader after the commit: %q", got)
	}
}

// TestMaxFailuresOption: Options.MaxFailures reaches the observers.
func TestMaxFailuresOption(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{MaxFailures: 2})
	runs := 0
	err := db.Observe(ctx, percolator.Observer{Name: "fails", Column: "in", Fn: func(context.Context, *percolator.Txn, string, string) error {
		runs++
		return errors.New("always")
	}})
	if err != nil {
		t.Fatal(err)
	}
	set(t, db, "r", "v") // column v: not observed
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r", "in", []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Drain: true}); err != nil {
		t.Fatal(err)
	}
	q, err := db.Quarantine(ctx)
	if err != nil || len(q) != 1 || q[0].Failures != 2 || runs != 2 {
		t.Fatalf("quarantine %+v after %d runs, %v: want one, after 2 failures", q, runs, err)
	}
}

// versionedOracle is Options.Oracle of an elected oracle that reads the
// observer registry version (an oracle.Client over oracle/etcd's
// backend), counting the commits that ask it for a version.
type versionedOracle struct {
	*oracle.Client
	versioned atomic.Int64
}

func (v *versionedOracle) TimestampVersion(ctx context.Context) (uint64, uint64, bool, error) {
	v.versioned.Add(1)
	return v.Client.TimestampVersion(ctx)
}

// storeVersioned allocates, then reads st's registry version, as an
// oracle given the store does.
type storeVersioned struct {
	a  *oracle.Allocator
	st storage.Store
}

func (s storeVersioned) Allocate(ctx context.Context, n int) (uint64, error) {
	return s.a.Allocate(ctx, n)
}

func (s storeVersioned) AllocateVersioned(ctx context.Context, n int) (uint64, uint64, bool, error) {
	first, err := s.a.Allocate(ctx, n)
	if err != nil {
		return 0, 0, false, err
	}
	v, err := observer.StoredVersion(ctx, s.st)
	return first, v, err == nil, err
}

// TestStoreOracleVersionPassedOn: a DB on a shared Options.Store whose
// Options.Oracle returns registry versions commits with TimestampVersion
// (its registry re-read comes with the commit timestamp), one per write
// transaction; the DB's own wrapper of the oracle used to hide it.
func TestStoreOracleVersionPassedOn(t *testing.T) {
	st := storagetest.SharedStore{Store: memory.New()}
	a, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	orc := &versionedOracle{Client: oracle.NewClient(storeVersioned{a: a, st: st})}
	db := open(t, percolator.Options{Store: st, Oracle: orc})
	for i := range 3 {
		set(t, db, fmt.Sprint("r", i), "v")
	}
	if n := orc.versioned.Load(); n != 3 {
		t.Fatalf("%d commit timestamps asked with a version in 3 write transactions; want 3", n)
	}
}
