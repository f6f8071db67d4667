package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// onePhaseEnv is an embedded store whose owner runs the oracle, as a DB
// on a directory: one in-memory allocator is both the clients' oracle
// and the store's stamper.
type onePhaseEnv struct {
	store *pebble.Store
	alloc *oracle.Allocator
	orc   *oracle.Client
}

func newOnePhaseEnv(t *testing.T) *onePhaseEnv {
	t.Helper()
	st, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alloc.Close() })
	st.SetStamper(alloc)
	return &onePhaseEnv{store: st, alloc: alloc, orc: oracle.NewClient(alloc)}
}

// client opens the owner's client over store (st, or the env's store).
func (e *onePhaseEnv) client(t *testing.T, st storage.Store, opts Options) *Client {
	t.Helper()
	if st == nil {
		st = e.store
	}
	if opts.Owner == "" {
		opts.Owner = "owner"
	}
	c, err := NewClient(context.Background(), st, e.orc, coord.NewLocal(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func setAndCommit(ctx context.Context, c *Client, kv ...string) (*Txn, error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return nil, err
	}
	for i := 0; i+2 < len(kv); i += 3 {
		if err := tx.Set(kv[i], kv[i+1], []byte(kv[i+2])); err != nil {
			return nil, err
		}
	}
	return tx, tx.Commit(ctx)
}

// TestOnePhaseCommit: a transaction whose writes fall in one row commits
// in one call, and leaves what a two-phase commit leaves: its data at
// start_ts, a commit record per cell above start_ts, and no lock; a
// transaction over two rows, a client with TwoPhaseOnly, and a store with
// no oracle attached commit in two phases.
func TestOnePhaseCommit(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	c := e.client(t, nil, Options{InlineSize: -1})
	tx, err := setAndCommit(ctx, c, "r", "a", "1", "r", "b", "2")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.OnePhase != 1 || s.Commits != 1 {
		t.Fatalf("stats after a one-row commit: %+v; want 1 commit, one-phase", s)
	}
	r, err := e.store.ReadRow(ctx, []byte("r"), storage.Filter{{Family: FamilyLock, AllQualifiers: true}, {Family: FamilyWrite, AllQualifiers: true}, {Family: FamilyData, AllQualifiers: true}})
	if err != nil {
		t.Fatal(err)
	}
	var writes, data int
	var commitTS uint64
	for _, cell := range r.Cells {
		switch cell.Family {
		case FamilyLock:
			t.Fatalf("a lock after a one-phase commit: %+v", cell)
		case FamilyData:
			data++
			if cell.TS != tx.StartTS() {
				t.Errorf("data at %d, want start_ts %d", cell.TS, tx.StartTS())
			}
		case FamilyWrite:
			writes++
			w, err := DecodeWrite(cell.Value)
			if err != nil || w.StartTS != tx.StartTS() || w.Op != OpPut || cell.TS <= tx.StartTS() {
				t.Errorf("commit record %+v at %d: %v; want a put of start_ts %d above it", w, cell.TS, err, tx.StartTS())
			}
			if commitTS != 0 && cell.TS != commitTS {
				t.Errorf("commit records at %d and %d: one commit has one timestamp", commitTS, cell.TS)
			}
			commitTS = cell.TS
		}
	}
	if writes != 2 || data != 2 {
		t.Fatalf("%d commit records, %d data cells; want 2 and 2", writes, data)
	}
	rd, _ := c.BeginReadOnly(ctx)
	if v, err := rd.Get(ctx, "r", "b"); err != nil || string(v) != "2" {
		t.Fatalf("r/b = %q, %v; want 2", v, err)
	}

	if _, err := setAndCommit(ctx, c, "x", "a", "1", "y", "a", "2"); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.OnePhase != 1 || s.Commits != 2 {
		t.Fatalf("stats after a two-row commit: %+v; want it in two phases", s)
	}
	two := e.client(t, notOwned{e.store}, Options{Owner: "two", TwoPhaseOnly: true})
	if _, err := setAndCommit(ctx, two, "r", "a", "3"); err != nil || two.Stats().OnePhase != 0 {
		t.Fatalf("TwoPhaseOnly: %v, %+v; want a two-phase commit", err, two.Stats())
	}

	e.store.SetStamper(nil)
	if _, err := setAndCommit(ctx, c, "r", "a", "4"); err != nil {
		t.Fatalf("a one-row commit on a store with no oracle attached: %v", err)
	}
	if s := c.Stats(); s.OnePhase != 1 || s.Commits != 3 {
		t.Fatalf("stats with no oracle attached: %+v; want a two-phase commit", s)
	}
	rd, _ = c.BeginReadOnly(ctx)
	if v, err := rd.Get(ctx, "r", "a"); err != nil || string(v) != "4" {
		t.Fatalf("r/a = %q, %v; want 4", v, err)
	}
}

// TestOnePhaseConflicts: a one-phase commit applies nothing where a
// newer write committed, where another transaction's lock stands, or
// where its own rollback record is; a dead transaction's lock is
// resolved and the commit goes through.
func TestOnePhaseConflicts(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	c := e.client(t, nil, Options{})
	old, _ := c.Begin(ctx)
	if _, err := setAndCommit(ctx, c, "r", "v", "new"); err != nil {
		t.Fatal(err)
	}
	_ = old.Set("r", "v", []byte("old"))
	var ce *ConflictError
	if err := old.Commit(ctx); !errors.As(err, &ce) {
		t.Fatalf("a one-phase commit under a newer write: %v; want a conflict", err)
	}

	// A live two-phase transaction's lock on the cell.
	writer := e.client(t, notOwned{e.store}, Options{Owner: "writer", TwoPhaseOnly: true})
	writer.crash = func(p string) bool { return p == crashAfterPrimaryPrewrite }
	w, _ := writer.Begin(ctx)
	_ = w.Set("r", "v", []byte("locked"))
	_ = w.Set("s", "v", []byte("locked"))
	if err := w.Commit(ctx); !errors.Is(err, errCrashed) {
		t.Fatalf("the crashed writer: %v", err)
	}
	live := coord.NewLocal()
	live.Register("writer")
	c2, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := setAndCommit(ctx, c2, "r", "v", "blocked"); !errors.As(err, &ce) {
		t.Fatalf("a one-phase commit beside a live lock: %v; want a conflict", err)
	}
	// The writer dies: its lock is rolled back and the commit goes on.
	live.Unregister("writer")
	if _, err := setAndCommit(ctx, c2, "r", "v", "through"); err != nil {
		t.Fatalf("a one-phase commit beside a dead transaction's lock: %v", err)
	}
	rd, _ := c2.BeginReadOnly(ctx)
	if v, err := rd.Get(ctx, "r", "v"); err != nil || string(v) != "through" {
		t.Fatalf("r/v = %q, %v", v, err)
	}
	if v, err := rd.Get(ctx, "s", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("s/v after the dead writer's rollback = %q, %v; want not found", v, err)
	}
}

// dropReply applies a one-phase commit and then reports a transport
// error, the first drop times: the reply is lost, the commit is not. It
// is not exclusive, as a remote store is not: its client keeps no index
// and sends every call through it.
type dropReply struct {
	*pebble.Store
	drop    atomic.Int64
	applied atomic.Int64
}

func (*dropReply) Exclusive() bool { return false }

// movedAfterDrop applies the first one-phase commit and loses its reply,
// then refuses every copy as a server whose observer registry moved
// meanwhile would.
type movedAfterDrop struct {
	*pebble.Store
	calls atomic.Int64
}

func (*movedAfterDrop) Exclusive() bool { return false }

func (m *movedAfterDrop) CommitOnePhase(ctx context.Context, row []byte, pred storage.Filter, muts, stamped []storage.Mutation, _ *uint64) (uint64, bool, error) {
	if m.calls.Add(1) > 1 {
		return 0, false, storage.ErrObserversMoved
	}
	if _, _, err := m.Store.CommitOnePhase(ctx, row, pred, muts, stamped, nil); err != nil {
		return 0, false, err
	}
	return 0, false, fmt.Errorf("%w: reply lost", storage.ErrUnavailable)
}

// TestOnePhaseRefusedAfterLostReply: a one-phase commit whose first copy
// applied (reply lost) and whose next copy is refused (the registry
// moved) is not redone in two phases (its prewrite would find its own
// commit and report a conflict, and the caller would run the
// transaction again): the row says it committed.
func TestOnePhaseRefusedAfterLostReply(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	m := &movedAfterDrop{Store: e.store}
	c := e.client(t, m, Options{})
	c.SetObservers(staticObserved{})
	if _, err := setAndCommit(ctx, c, "r", "v", "1"); err != nil {
		t.Fatalf("commit: %v; want the first copy's commit reported", err)
	}
	if s := c.Stats(); s.Commits != 1 || s.OnePhase != 1 || s.Conflicts != 0 {
		t.Fatalf("stats: %+v", s)
	}
	// A refusal with nothing applied before it: two phases.
	m.calls.Store(1)
	if _, err := setAndCommit(ctx, c, "r", "v", "2"); err != nil || c.Stats().OnePhase != 1 || c.Stats().Commits != 2 {
		t.Fatalf("after a plain refusal: %v, %+v; want a two-phase commit", err, c.Stats())
	}
}

// staticObserved observes nothing, at version 1.
type staticObserved struct{}

func (staticObserved) Snapshot() (Observed, uint64) { return nil, 1 }
func (staticObserved) Refresh(context.Context) (Observed, uint64, error) {
	return nil, 1, nil
}

// notOwned is the store seen by a second client of its process: no
// index of its own (the owner's hook keeps the one index).
type notOwned struct{ *pebble.Store }

func (notOwned) Exclusive() bool { return false }

func (d *dropReply) CommitOnePhase(ctx context.Context, row []byte, pred storage.Filter, muts, stamped []storage.Mutation, observers *uint64) (uint64, bool, error) {
	ts, conflict, err := d.Store.CommitOnePhase(ctx, row, pred, muts, stamped, observers)
	if err == nil && !conflict {
		d.applied.Add(1)
	}
	if d.drop.Add(-1) >= 0 {
		return 0, false, fmt.Errorf("%w: reply lost", storage.ErrUnavailable)
	}
	return ts, conflict, err
}

// TestOnePhaseLostReply: a one-phase commit whose reply is lost is sent
// again, finds its own commit records and reports the commit; one whose
// every reply is lost is settled by a rollback record, which a late copy
// cannot pass; the store wrapper forwards no index (a remote store's
// client has none), so the calls are the plain ones.
func TestOnePhaseLostReply(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	d := &dropReply{Store: e.store}
	d.drop.Store(1)
	c := e.client(t, d, Options{})
	if _, err := setAndCommit(ctx, c, "r", "v", "1"); err != nil {
		t.Fatalf("a commit whose first reply was lost: %v", err)
	}
	if n := d.applied.Load(); n != 1 {
		t.Fatalf("%d copies applied; want 1", n)
	}
	if s := c.Stats(); s.OnePhase != 1 || s.Conflicts != 0 {
		t.Fatalf("stats: %+v", s)
	}
	rd, _ := c.BeginReadOnly(ctx)
	if v, err := rd.Get(ctx, "r", "v"); err != nil || string(v) != "1" {
		t.Fatalf("r/v = %q, %v", v, err)
	}

	// Every reply lost: the first copy applied, and the settlement finds it.
	d.drop.Store(math.MaxInt32)
	d.applied.Store(0)
	if _, err := setAndCommit(ctx, c, "r", "v", "2"); err != nil {
		t.Fatalf("a commit whose every reply was lost: %v", err)
	}
	if n := d.applied.Load(); n != 1 {
		t.Fatalf("%d copies applied; want 1", n)
	}

	// A settlement before any copy applied: the rollback record refuses
	// the late copy.
	tx, _ := c.Begin(ctx)
	_ = tx.Set("r", "v", []byte("late"))
	rw := groupByRow(tx.writes)[0]
	if err := c.settleOnePhase(ctx, tx, rw, "the call was lost"); err == nil {
		t.Fatal("a settlement with nothing applied reported a commit")
	}
	_, muts, stamped := c.onePhaseCall(tx, rw)
	pred := prewritePredicate(tx, rw)
	if _, conflict, err := e.store.CommitOnePhase(ctx, rw.row, pred, muts, stamped, nil); err != nil || !conflict {
		t.Fatalf("the late copy after the rollback record: conflict %v, %v; want refused", conflict, err)
	}
	rd, _ = c.BeginReadOnly(ctx)
	if v, err := rd.Get(ctx, "r", "v"); err != nil || string(v) != "2" {
		t.Fatalf("r/v = %q, %v; want 2", v, err)
	}
}

// TestOnePhaseCrash: a process that dies right after its one-phase
// commit applied leaves a committed transaction, no lock to resolve.
func TestOnePhaseCrash(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	c := e.client(t, nil, Options{})
	c.crash = func(p string) bool { return p == crashAfterOnePhase }
	if _, err := setAndCommit(ctx, c, "r", "v", "1"); !errors.Is(err, errCrashed) {
		t.Fatalf("commit: %v; want the crash", err)
	}
	c.crash = nil
	// A fresh snapshot, as a restarted process's: this client never
	// acknowledged the commit, so its read-only snapshots may start below
	// it (doc.go, "Read-only snapshots").
	rd, _ := c.Begin(ctx)
	if v, err := rd.Get(ctx, "r", "v"); err != nil || string(v) != "1" {
		t.Fatalf("r/v after the crash = %q, %v; want 1", v, err)
	}
}

// lateOnePhase holds the first one-phase commit sent through it, to
// deliver later, and reports it failed; before each later call it runs
// before, if set. It is not exclusive, as a remote store is not.
type lateOnePhase struct {
	*pebble.Store
	calls  atomic.Int64
	before func()
	held   func() (bool, error)
}

func (*lateOnePhase) Exclusive() bool { return false }

func (l *lateOnePhase) CommitOnePhase(ctx context.Context, row []byte, pred storage.Filter, muts, stamped []storage.Mutation, observers *uint64) (uint64, bool, error) {
	if l.calls.Add(1) == 1 {
		late := context.WithoutCancel(ctx)
		l.held = func() (bool, error) {
			_, conflict, err := l.Store.CommitOnePhase(late, row, pred, muts, stamped, observers)
			return conflict, err
		}
		return 0, false, fmt.Errorf("%w: the copy is delayed in the network", storage.ErrUnavailable)
	}
	if l.before != nil {
		l.before()
	}
	return l.Store.CommitOnePhase(ctx, row, pred, muts, stamped, observers)
}

// TestOnePhaseLateCopyAfterConflict: a one-phase commit whose first copy
// failed (delayed, not lost) and whose next copy is refused by a live
// transaction's lock reports a conflict; the delayed copy, landing once
// that lock is rolled back, must find the rollback record the refusal
// left and apply nothing. Without it the copy would commit a transaction
// its caller was told had failed.
func TestOnePhaseLateCopyAfterConflict(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	live := coord.NewLocal()
	live.Register("other")
	open := func(st storage.Store, owner string) *Client {
		c, err := NewClient(ctx, st, e.orc, live, Options{Owner: owner, TwoPhaseOnly: owner == "other"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	l := &lateOnePhase{Store: e.store}
	c := open(l, "owner")
	other := open(notOwned{e.store}, "other")
	if _, err := setAndCommit(ctx, c, "r", "v", "old"); err != nil {
		t.Fatal(err)
	}
	l.calls.Store(0)

	// The blocker begins first: its rollback record, at its start_ts, is
	// below the commit's start_ts and does not refuse the delayed copy.
	blocker, _ := other.Begin(ctx)
	_ = blocker.Set("r", "v", []byte("blocker"))
	tx, _ := c.Begin(ctx)
	_ = tx.Set("r", "v", []byte("told it failed"))
	brows := groupByRow(blocker.writes)
	l.before = func() {
		l.before = nil
		if err := other.prewrite(ctx, blocker, brows[0], &blocker.writes[0], nil); err != nil {
			t.Errorf("the blocker's prewrite: %v", err)
		}
	}
	err := tx.Commit(ctx)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("commit beside a live lock after a failed copy: %v; want a conflict", err)
	}
	if err := other.abort(ctx, blocker, brows, nil); err != nil {
		t.Fatal(err)
	}
	if l.held == nil {
		t.Fatal("no copy was held")
	}
	if conflict, err := l.held(); err != nil || !conflict {
		t.Fatalf("the delayed copy: conflict %v, %v; want it refused", conflict, err)
	}
	if v, err := readValue(ctx, c, "r", "v"); err != nil || v != "old" {
		t.Fatalf("r/v = %q, %v; want old: the failed transaction must stay invisible", v, err)
	}
}
