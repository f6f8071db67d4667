package txn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// pushEnv is an env whose clients read through locks, and a transaction of
// the writer that has prewritten rows a (primary) and b with "new" over
// "old", and not yet committed: its owner is alive, its lock unexpired.
type pushEnv struct {
	*env
	w    *Client
	tx   *Txn
	rows []*rowWrites
	// early is a commit timestamp taken before any reader began: a commit
	// point at it must be refused once a reader pushed.
	early uint64
}

func newPushEnv(t *testing.T, backend string) *pushEnv {
	return newPushEnvOn(t, newEnvBackend(t, backend))
}

// newPushEnvOn is newPushEnv on e.
func newPushEnvOn(t *testing.T, e *env) *pushEnv {
	ctx := context.Background()
	w := e.client("writer")
	w.opts.ReadThroughLocks = true
	init, _ := w.Begin(ctx)
	for _, r := range []string{"a", "b"} {
		_ = init.Set(r, "v", []byte("old"))
	}
	if err := init.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx, _ := w.Begin(ctx)
	for _, r := range []string{"a", "b"} {
		_ = tx.Set(r, "v", []byte("new"))
	}
	rows := groupByRow(tx.writes)
	for _, rw := range rows {
		if err := w.prewrite(ctx, tx, rw, &tx.writes[0], nil); err != nil {
			t.Fatal(err)
		}
	}
	early, _ := e.oracle.Timestamp(ctx)
	return &pushEnv{env: e, w: w, tx: tx, rows: rows, early: early}
}

func (p *pushEnv) reader(name string, push bool) *Client {
	c := p.client(name)
	c.opts.ReadThroughLocks = push
	return c
}

// pushes returns the push cells of the writer's primary lock: in the
// index where pushes live in memory (one cell for its push, if any),
// else in the store.
func (p *pushEnv) pushes(t *testing.T) []storage.Cell {
	if p.w.pushesInMemory() {
		if p.w.index.pushedFrom([]byte("a"), "v", p.tx.startTS, 0) {
			return []storage.Cell{{Family: FamilyPush, Qualifier: pushQualifier("v", p.tx.startTS)}}
		}
		return nil
	}
	r, err := p.store.ReadRow(context.Background(), []byte("a"), storage.Filter{{Family: FamilyPush, AllQualifiers: true}})
	if err != nil {
		t.Fatal(err)
	}
	return r.Cells
}

// TestReadThroughLocks: a reader that meets a live transaction's lock,
// primary or secondary, pushes it and reads the snapshot's value at once;
// the transaction's commit point at a timestamp below the reader's is
// refused, and it commits at a new one, above. The reader's snapshot
// stays whole; the pushes go with the lock. Without the option the reader
// waits.
func TestReadThroughLocks(t *testing.T) {
	for _, backend := range backends {
		for _, row := range []string{"a", "b"} {
			t.Run(backend+"/"+row, func(t *testing.T) { testReadThroughLocks(t, backend, row) })
		}
	}
}

func testReadThroughLocks(t *testing.T, backend, row string) {
	ctx := context.Background()
	p := newPushEnv(t, backend)
	waiter, _ := p.reader("waiter", false).Begin(ctx)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := waiter.Get(short, row, "v"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get without reads through locks: %v, want it to wait", err)
	}
	cancel()
	rc := p.reader("reader", true)
	rd, _ := rc.Begin(ctx)
	for _, r := range []string{row, "a", "b"} {
		if v, err := rd.Get(ctx, r, "v"); err != nil || string(v) != "old" {
			t.Fatalf("Get(%s) through the lock: %q, %v; want old", r, v, err)
		}
	}
	if got := rc.Stats().Pushes; got == 0 {
		t.Fatalf("Pushes = 0 after reading past a live lock")
	}
	if n := len(p.pushes(t)); n != 1 {
		t.Fatalf("%d push cells at the primary, want 1 (one reader, one version)", n)
	}
	commitTS, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
	if err != nil {
		t.Fatal(err)
	}
	if commitTS <= rd.StartTS() {
		t.Fatalf("committed at %d, not above the pushing reader's start_ts %d", commitTS, rd.StartTS())
	}
	if p.w.Stats().Repushed == 0 {
		t.Fatalf("Repushed = 0: the commit point at %d was not refused", p.early)
	}
	p.w.commitSecondaries(ctx, p.tx, p.rows[1:], commitTS)
	if n := len(p.pushes(t)); n != 0 {
		t.Fatalf("%d push cells left after the commit", n)
	}
	for _, r := range []string{"a", "b"} {
		if v, err := rd.Get(ctx, r, "v"); err != nil || string(v) != "old" {
			t.Fatalf("Get(%s) after the commit, same snapshot: %q, %v; want old", r, v, err)
		}
	}
	kvs, err := rd.Scan(ctx, "", "", "v", 0)
	if err != nil || len(kvs) != 2 || string(kvs[0].Value) != "old" || string(kvs[1].Value) != "old" {
		t.Fatalf("Scan, same snapshot: %v, %v; want old, old", kvs, err)
	}
	late, _ := rc.Begin(ctx)
	for _, r := range []string{"a", "b"} {
		if v, err := late.Get(ctx, r, "v"); err != nil || string(v) != "new" {
			t.Fatalf("Get(%s), a later snapshot: %q, %v; want new", r, v, err)
		}
	}
}

// TestPushScan: a scan through locks pushes every live transaction in its
// range and returns the snapshot's values at once.
func TestPushScan(t *testing.T) {
	ctx := context.Background()
	p := newPushEnv(t, "shared")
	rd, _ := p.reader("reader", true).Begin(ctx)
	kvs, err := rd.Scan(ctx, "", "", "v", 0)
	if err != nil || len(kvs) != 2 || string(kvs[0].Value) != "old" || string(kvs[1].Value) != "old" {
		t.Fatalf("Scan through locks: %v, %v; want old, old", kvs, err)
	}
	many, err := rd.GetMany(ctx, []CellKey{{"a", "v"}, {"b", "v"}})
	if err != nil || string(many[0]) != "old" || string(many[1]) != "old" {
		t.Fatalf("GetMany through locks: %q, %v; want old, old", many, err)
	}
	if n := len(p.pushes(t)); n != 1 {
		t.Fatalf("%d push cells, want 1", n)
	}
}

// TestPushDecided: a push that finds the primary's lock gone applies
// nothing, and the reader resolves the lock as before: rolled forward
// when the transaction committed (below the reader: it sees it), rolled
// back when it was.
func TestPushDecided(t *testing.T) {
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			p := newPushEnv(t, "shared")
			rc := p.reader("reader", true)
			if commit {
				if _, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early); err != nil {
					t.Fatal(err)
				}
			} else if err := p.w.rollBackPrimary(ctx, []byte("a"), "v", p.tx.startTS); err != nil {
				t.Fatal(err)
			}
			late := p.pushes(t)
			if pushed, err := rc.push(ctx, []byte("a"), "v", p.tx.startTS, p.early+100); err != nil || pushed {
				t.Fatalf("a push after the lock went: %v, %v; want not applied", pushed, err)
			}
			if n := len(p.pushes(t)); n != len(late) {
				t.Fatalf("a late push left a cell")
			}
			rd, _ := rc.Begin(ctx)
			want := map[bool]string{true: "new", false: "old"}[commit]
			if v, err := rd.Get(ctx, "b", "v"); err != nil || string(v) != want {
				t.Fatalf("Get(b): %q, %v; want %s", v, err, want)
			}
			if rc.Stats().Pushes != 0 {
				t.Fatalf("a decided transaction was pushed")
			}
		})
	}
}

// TestWritersDoNotPush: a prewrite that meets a live lock waits
// (a conflict), it never pushes: pushes are for reads.
func TestWritersDoNotPush(t *testing.T) {
	ctx := context.Background()
	p := newPushEnv(t, "shared")
	wc := p.reader("other", true)
	tx, _ := wc.Begin(ctx)
	_ = tx.Set("b", "v", []byte("other"))
	if err := tx.Commit(ctx); !errors.Is(err, ErrConflict) {
		t.Fatalf("a writer over a live lock: %v, want a conflict", err)
	}
	if n := len(p.pushes(t)); n != 0 {
		t.Fatalf("a writer pushed: %d push cells", n)
	}
}

// TestPushCrash: a reader that pushed and died before reading leaves a
// push and nothing else; the transaction commits above it, its reads of
// the rest see it whole, and no push is left.
func TestPushCrash(t *testing.T) {
	ctx := context.Background()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			p := newPushEnv(t, backend)
			rc := p.reader("reader", true)
			rc.crash = func(point string) bool { return point == crashAfterPush }
			rd, _ := rc.Begin(ctx)
			if v, err := rd.Get(ctx, "b", "v"); !errors.Is(err, errCrashed) {
				t.Fatalf("Get stopped after its push: %q, %v; want the crash", v, err)
			}
			if n := len(p.pushes(t)); n != 1 {
				t.Fatalf("%d push cells after the crash, want 1", n)
			}
			p.live.Unregister("reader")
			commitTS, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
			if err != nil || commitTS <= rd.StartTS() {
				t.Fatalf("commit after a dead reader's push: at %d, %v; want above %d", commitTS, err, rd.StartTS())
			}
			if n := len(p.pushes(t)); n != 0 {
				t.Fatalf("%d push cells left after the commit", n)
			}
			other, _ := p.reader("other", true).Begin(ctx)
			for _, r := range []string{"a", "b"} {
				if v, err := other.Get(ctx, r, "v"); err != nil || string(v) != "new" {
					t.Fatalf("Get(%s) after: %q, %v; want new", r, v, err)
				}
			}
		})
	}
}

// TestPushRepushBounded: a commit point that readers push past every
// time it is sent gives up after maxRepush new timestamps: its primary
// is rolled back and it fails with a conflict, changing nothing.
func TestPushRepushBounded(t *testing.T) {
	ctx := context.Background()
	p := newPushEnv(t, "shared")
	// A push far above any timestamp the oracle hands out in the test.
	if pushed, err := p.w.push(ctx, []byte("a"), "v", p.tx.startTS, 1<<40); err != nil || !pushed {
		t.Fatalf("push: %v, %v", pushed, err)
	}
	_, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("commit pushed past forever: %v, want a conflict", err)
	}
	if got := p.w.Stats().Repushed; got != maxRepush {
		t.Fatalf("Repushed = %d, want %d", got, maxRepush)
	}
	if n := len(p.pushes(t)); n != 0 {
		t.Fatalf("%d push cells left after the rollback", n)
	}
	rd, _ := p.reader("reader", true).Begin(ctx)
	if v, err := rd.Get(ctx, "b", "v"); err != nil || string(v) != "old" {
		t.Fatalf("Get(b) after the rollback: %q, %v; want old", v, err)
	}
}

// TestCollectPushes: the collector removes the pushes below the safe
// point of a row it collects (a push left by a commit point that did not
// remove them: a client without the option), and keeps those above.
func TestCollectPushes(t *testing.T) {
	ctx := context.Background()
	p := newPushEnv(t, "shared")
	commitTS, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
	if err != nil {
		t.Fatal(err)
	}
	q := pushQualifier("v", p.tx.startTS)
	if err := p.store.Mutate(ctx, []byte("a"), storage.SetCell(FamilyPush, q, commitTS+1, nil), storage.SetCell(FamilyPush, q, commitTS+10, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.w.CollectRow(ctx, []byte("a"), commitTS+5); err != nil {
		t.Fatal(err)
	}
	got := p.pushes(t)
	if len(got) != 1 || got[0].TS != commitTS+10 {
		t.Fatalf("pushes after collecting below %d: %v; want the one at %d", commitTS+5, got, commitTS+10)
	}
}

// TestPushInMemory: on a store the client owns (the embedded one) a push
// writes nothing: it is kept in the index while the pushed lock stands,
// the commit point reads it there and commits above the reader, and it
// goes with the lock, whether the transaction commits or is rolled back.
// A push of a lock that is gone is refused.
func TestPushInMemory(t *testing.T) {
	ctx := context.Background()
	for _, outcome := range []string{"commit", "rollback"} {
		t.Run(outcome, func(t *testing.T) {
			p := newPushEnvOn(t, newOwnedEnv(t))
			if !p.w.pushesInMemory() {
				t.Fatal("the owner of a pebble store keeps no pushes in memory")
			}
			rd, _ := p.reader("reader", true).Begin(ctx)
			if v, err := rd.Get(ctx, "b", "v"); err != nil || string(v) != "old" {
				t.Fatalf("Get(b) through the lock: %q, %v; want old", v, err)
			}
			stored, err := p.store.ReadRow(ctx, []byte("a"), storage.Filter{{Family: FamilyPush, AllQualifiers: true}})
			if err != nil || len(stored.Cells) != 0 {
				t.Fatalf("push cells in the store: %v, %v; want none", stored.Cells, err)
			}
			if !p.w.index.pushedFrom([]byte("a"), "v", p.tx.startTS, rd.StartTS()) {
				t.Fatalf("no push at or above the reader's %d in the index", rd.StartTS())
			}
			switch outcome {
			case "commit":
				commitTS, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
				if err != nil || commitTS <= rd.StartTS() {
					t.Fatalf("commit point after the push: at %d, %v; want above %d", commitTS, err, rd.StartTS())
				}
				if p.w.Stats().Repushed == 0 {
					t.Fatalf("the commit point at %d, below the push, was not refused", p.early)
				}
			case "rollback":
				if err := p.w.abort(ctx, p.tx, p.rows, ErrConflict); !errors.Is(err, ErrConflict) {
					t.Fatal(err)
				}
			}
			if p.w.index.pushedFrom([]byte("a"), "v", p.tx.startTS, 0) {
				t.Fatal("the push outlived its lock")
			}
			if pushed, err := p.w.push(ctx, []byte("a"), "v", p.tx.startTS, rd.StartTS()+1); err != nil || pushed {
				t.Fatalf("push of a lock that is gone: %v, %v; want refused", pushed, err)
			}
			if p.w.index.pushedFrom([]byte("a"), "v", p.tx.startTS, 0) {
				t.Fatal("a refused push was kept")
			}
			for _, r := range []string{"a", "b"} {
				if v, err := rd.Get(ctx, r, "v"); err != nil || string(v) != "old" {
					t.Fatalf("Get(%s), the reader's snapshot: %q, %v; want old", r, v, err)
				}
			}
		})
	}
}

// TestPushInMemoryLostReplies: a push whose every reply is lost (applied,
// then the call fails; sent again, the same) still stands in the index,
// raised once however often it was applied; the reader that got no
// answer fails, and a read of its snapshot later pushes again and reads
// past; the commit point below the push is refused and the transaction
// commits above it.
func TestPushInMemoryLostReplies(t *testing.T) {
	ctx := context.Background()
	st, err := pebble.Open(t.TempDir(), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	store, lossy := storagetest.NewLossy(st, storagetest.LossyOptions{Seed: 1, LoseReply: 1})
	lossy.SetEnabled(false)
	e := newEnvOn(t, store, true)
	st.SetStamper(e.oracle)
	p := newPushEnvOn(t, e)
	if !p.w.pushesInMemory() {
		t.Fatal("the owner of the wrapped pebble store keeps no pushes in memory")
	}
	rd, _ := p.reader("reader", true).Begin(ctx)
	lossy.SetEnabled(true)
	if v, err := rd.Get(ctx, "b", "v"); !errors.Is(err, storagetest.ErrInjected) {
		t.Fatalf("Get with every reply lost: %q, %v; want the injected fault", v, err)
	}
	lossy.SetEnabled(false)
	if lossy.Stats().RepliesLost < 2 {
		t.Fatalf("%d replies lost; want the push and its copies", lossy.Stats().RepliesLost)
	}
	if !p.w.index.pushedFrom([]byte("a"), "v", p.tx.startTS, rd.StartTS()) {
		t.Fatal("the push whose replies were lost does not stand")
	}
	if v, err := rd.Get(ctx, "b", "v"); err != nil || string(v) != "old" {
		t.Fatalf("Get(b) again: %q, %v; want old", v, err)
	}
	commitTS, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
	if err != nil || commitTS <= rd.StartTS() || p.w.Stats().Repushed == 0 {
		t.Fatalf("commit after the push: at %d (repushed %d), %v; want above %d", commitTS, p.w.Stats().Repushed, err, rd.StartTS())
	}
	if p.w.index.pushedFrom([]byte("a"), "v", p.tx.startTS, 0) {
		t.Fatal("the push outlived its lock")
	}
}
