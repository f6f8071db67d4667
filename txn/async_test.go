package txn

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// asyncCells reads every lock and write record of rows.
func asyncCells(t *testing.T, st storage.Store, rows ...string) (locks []Lock, writes map[string]uint64) {
	t.Helper()
	writes = map[string]uint64{}
	for _, row := range rows {
		r, err := st.ReadRow(context.Background(), []byte(row), storage.Filter{{Family: FamilyLock, AllQualifiers: true}, {Family: FamilyWrite, AllQualifiers: true}})
		if err != nil {
			t.Fatal(err)
		}
		for _, cell := range r.Cells {
			switch cell.Family {
			case FamilyLock:
				l, err := decodeLock(cell.Value)
				if err != nil {
					t.Fatalf("lock %s/%s: %v", row, cell.Qualifier, err)
				}
				locks = append(locks, l)
			case FamilyWrite:
				w, err := DecodeWrite(cell.Value)
				if err != nil {
					t.Fatal(err)
				}
				writes[fmt.Sprintf("%s/%s %v@%d", row, cell.Qualifier, w.Op, w.StartTS)] = cell.TS
			}
		}
	}
	return locks, writes
}

func readValue(ctx context.Context, c *Client, row, col string) (string, error) {
	rd, err := c.BeginReadOnly(ctx)
	if err != nil {
		return "", err
	}
	v, err := rd.Get(ctx, row, col)
	return string(v), err
}

// TestAsyncCommit: a transaction over several rows commits in one call,
// and leaves what a two-phase commit leaves once its records are
// written: a commit record per cell at one commit timestamp, the one the
// store stamped, and no lock; one row commits in one phase, a
// transaction past the bounds, a client without the option or with
// TwoPhaseOnly, and a store with no oracle attached commit in two
// phases.
func TestAsyncCommit(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	c := e.client(t, nil, Options{AsyncCommit: true})
	tx, err := setAndCommit(ctx, c, "a", "v", "1", "b", "v", "2", "b", "w", "3")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Async != 1 || s.Commits != 1 {
		t.Fatalf("stats: %+v; want one async commit", s)
	}
	c.background.Wait()
	locks, writes := asyncCells(t, e.store, "a", "b")
	if len(locks) != 0 || len(writes) != 3 {
		t.Fatalf("after the records: locks %+v, writes %v; want three commit records and no lock", locks, writes)
	}
	var commitTS uint64
	for k, ts := range writes {
		if ts <= tx.StartTS() || (commitTS != 0 && ts != commitTS) {
			t.Fatalf("record %s at %d (start_ts %d, others at %d): one commit timestamp above start_ts", k, ts, tx.StartTS(), commitTS)
		}
		commitTS = ts
	}
	for _, cell := range [][2]string{{"a", "v"}, {"b", "v"}, {"b", "w"}} {
		if v, err := readValue(ctx, c, cell[0], cell[1]); err != nil || v == "" {
			t.Fatalf("%s/%s = %q, %v", cell[0], cell[1], v, err)
		}
	}

	if _, err := setAndCommit(ctx, c, "a", "v", "one row"); err != nil || c.Stats().OnePhase != 1 || c.Stats().Async != 1 {
		t.Fatalf("a one-row commit: %v, %+v; want it in one phase", err, c.Stats())
	}
	big, _ := c.Begin(ctx)
	for i := range AsyncMaxWrites + 1 {
		_ = big.Set(fmt.Sprintf("row%03d", i), "v", []byte("x"))
	}
	if err := big.Commit(ctx); err != nil || c.Stats().Async != 1 {
		t.Fatalf("a commit past the bounds: %v, %+v; want it in two phases", err, c.Stats())
	}
	long := strings.Repeat("k", AsyncMaxKeyBytes/2)
	if _, err := setAndCommit(ctx, c, long+"1", "v", "x", long+"2", "v", "y"); err != nil || c.Stats().Async != 1 {
		t.Fatalf("two rows whose keys weigh more than %d bytes: %v, %+v; want it in two phases", AsyncMaxKeyBytes, err, c.Stats())
	}
	for _, opts := range []Options{{Owner: "off"}, {Owner: "two", AsyncCommit: true, TwoPhaseOnly: true}} {
		o := e.client(t, notOwned{e.store}, opts)
		if _, err := setAndCommit(ctx, o, "a", "v", "x", "b", "v", "y"); err != nil || o.Stats().Async != 0 {
			t.Fatalf("%+v: %v, %+v; want a two-phase commit", opts, err, o.Stats())
		}
	}
	e.store.SetStamper(nil)
	if _, err := setAndCommit(ctx, c, "a", "v", "4", "b", "v", "5"); err != nil || c.Stats().Async != 1 || !c.noAsync.Load() {
		t.Fatalf("no oracle attached: %v, %+v; want a two-phase commit, and no more asking", err, c.Stats())
	}
	if v, err := readValue(ctx, c, "b", "v"); err != nil || v != "5" {
		t.Fatalf("b/v = %q, %v; want 5", v, err)
	}
}

// TestAsyncConflicts: an async commit under a newer write, or beside a
// live transaction's lock, fails with a conflict and leaves nothing but
// rollback records; a dead transaction's lock is resolved and the rows it
// blocked are sent again in a call of their own, whose stamp is the
// commit timestamp.
func TestAsyncConflicts(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	c := e.client(t, nil, Options{AsyncCommit: true})
	old, _ := c.Begin(ctx)
	if _, err := setAndCommit(ctx, c, "b", "v", "new"); err != nil {
		t.Fatal(err)
	}
	_ = old.Set("a", "v", []byte("old"))
	_ = old.Set("b", "v", []byte("old"))
	var ce *ConflictError
	if err := old.Commit(ctx); !errors.As(err, &ce) {
		t.Fatalf("an async commit under a newer write: %v; want a conflict", err)
	}
	if locks, _ := asyncCells(t, e.store, "a", "b"); len(locks) != 0 {
		t.Fatalf("locks left by a conflict: %+v", locks)
	}
	if v, err := readValue(ctx, c, "a", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a/v after the conflict = %q, %v; want not found", v, err)
	}

	// A live two-phase transaction's lock on b.
	live := coord.NewLocal()
	live.Register("writer")
	writer, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "writer", TwoPhaseOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	writer.crash = func(p string) bool { return p == crashAfterPrimaryPrewrite }
	if _, err := setAndCommit(ctx, writer, "b", "v", "locked", "c", "v", "locked"); !errors.Is(err, errCrashed) {
		t.Fatalf("the crashed writer: %v", err)
	}
	c2, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "c2", AsyncCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := setAndCommit(ctx, c2, "a", "v", "blocked", "b", "v", "blocked"); !errors.As(err, &ce) {
		t.Fatalf("an async commit beside a live lock: %v; want a conflict", err)
	}
	if v, err := readValue(ctx, c2, "a", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a/v after a conflict on b = %q, %v; want not found (a rolled back)", v, err)
	}
	// The writer dies: its lock is rolled back, b is sent again, and
	// the commit goes on at the later call's stamp.
	live.Unregister("writer")
	tx, err := setAndCommit(ctx, c2, "a", "v", "through", "b", "v", "through")
	if err != nil {
		t.Fatalf("an async commit beside a dead transaction's lock: %v", err)
	}
	c2.background.Wait()
	_, writes := asyncCells(t, e.store, "a", "b")
	a, b := writes[fmt.Sprintf("a/v put@%d", tx.StartTS())], writes[fmt.Sprintf("b/v put@%d", tx.StartTS())]
	if a == 0 || a != b {
		t.Fatalf("commit records %v; want a and b at one commit timestamp", writes)
	}
	for _, cell := range [][2]string{{"a", "v"}, {"b", "v"}} {
		if v, err := readValue(ctx, c2, cell[0], cell[1]); err != nil || v != "through" {
			t.Fatalf("%s/%s = %q, %v; want through", cell[0], cell[1], v, err)
		}
	}
	if v, err := readValue(ctx, c2, "c", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("c/v after the dead writer's rollback = %q, %v; want not found", v, err)
	}
}

// crashedAsync leaves, by a client that stops at point, an async
// transaction writing a and b (and, when blockB, b blocked by a dead
// transaction's lock, so that the first call writes a alone). It returns
// the crashed transaction and the liveness both clients use, with the
// crashed owner alive.
func crashedAsync(t *testing.T, e *onePhaseEnv, point string, blockB bool) (*Txn, *coord.Local) {
	t.Helper()
	ctx := context.Background()
	live := coord.NewLocal()
	if blockB {
		dead, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "dead", TwoPhaseOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		dead.crash = func(p string) bool { return p == crashAfterPrimaryPrewrite }
		if _, err := setAndCommit(ctx, dead, "b", "v", "dead"); !errors.Is(err, errCrashed) {
			t.Fatalf("the dead writer: %v", err)
		}
		dead.Close()
	}
	live.Register("crasher")
	c, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "crasher", AsyncCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.crash = func(p string) bool { return p == point }
	tx, err := setAndCommit(ctx, c, "a", "v", "new", "b", "v", "new")
	if !errors.Is(err, errCrashed) && err != nil {
		t.Fatalf("the crashed async commit: %v", err)
	}
	return tx, live
}

// TestAsyncCrashAfterPrewrites: an owner that dies once every row holds
// its lock, before any commit record, has committed: a reader above the
// commit timestamp rolls its locks forward and reads its values, whether
// the owner is alive or not.
func TestAsyncCrashAfterPrewrites(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	tx, live := crashedAsync(t, e, crashAfterAsyncPrewrite, false)
	locks, _ := asyncCells(t, e.store, "a", "b")
	if len(locks) != 2 || !locks[0].Async || !locks[1].Async {
		t.Fatalf("locks after the crash: %+v; want two async locks", locks)
	}
	r, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, row := range []string{"b", "a"} {
		if v, err := readValue(ctx, r, row, "v"); err != nil || v != "new" {
			t.Fatalf("%s/v = %q, %v; want the committed value", row, v, err)
		}
	}
	if s := r.Stats(); s.AsyncResolved == 0 || s.LockWaits != 0 {
		t.Fatalf("reader stats %+v: want the locks decided from their rows, without a wait", s)
	}
	locks, writes := asyncCells(t, e.store, "a", "b")
	if len(locks) != 0 || writes[fmt.Sprintf("a/v put@%d", tx.StartTS())] != writes[fmt.Sprintf("b/v put@%d", tx.StartTS())] {
		t.Fatalf("after the reads: locks %+v, writes %v; want both rolled forward at one timestamp", locks, writes)
	}
}

// TestAsyncCrashBetweenPrewrites: an owner that dies after its first
// call wrote a, while b waits to be sent again, has not committed: a
// reader reads past its lock without waiting, even while the owner
// lives (the transaction commits above the reader if at all); once the
// owner is dead a writer leaves a rollback record at b, which decides
// the transaction rolled back, and a's lock goes.
func TestAsyncCrashBetweenPrewrites(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	if _, err := setAndCommit(ctx, e.client(t, notOwned{e.store}, Options{Owner: "seed"}), "a", "v", "old"); err != nil {
		t.Fatal(err)
	}
	tx, live := crashedAsync(t, e, crashBetweenAsyncPrewrites, true)
	r, err := NewClient(ctx, notOwned{e.store}, e.orc, live, Options{Owner: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v, err := readValue(ctx, r, "a", "v"); err != nil || v != "old" {
		t.Fatalf("a/v with the owner alive = %q, %v; want the old value, read past the lock", v, err)
	}
	if s := r.Stats(); s.AsyncReadPast != 1 || s.LockWaits != 0 {
		t.Fatalf("reader stats %+v: want one read past, no wait", s)
	}
	var ce *ConflictError
	if _, err := setAndCommit(ctx, r, "a", "v", "writer"); !errors.As(err, &ce) {
		t.Fatalf("a write beside the live owner's lock: %v; want a conflict", err)
	}
	live.Unregister("crasher")
	if _, err := setAndCommit(ctx, r, "a", "v", "writer"); err != nil {
		t.Fatalf("a write once the owner is dead: %v", err)
	}
	_, writes := asyncCells(t, e.store, "b")
	if _, ok := writes[fmt.Sprintf("b/v rollback@%d", tx.StartTS())]; !ok {
		t.Fatalf("b's records %v: want the rollback record that decided the transaction", writes)
	}
	if v, err := readValue(ctx, r, "b", "v"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b/v = %q, %v; want not found", v, err)
	}
	if locks, _ := asyncCells(t, e.store, "a", "b"); len(locks) != 0 {
		t.Fatalf("locks left: %+v", locks)
	}
}

// asyncDropReply applies async prewrites and then reports a transport
// error, the first drop times: the reply is lost, the write is not.
type asyncDropReply struct {
	*pebble.Store
	drop atomic.Int64
}

func (*asyncDropReply) Exclusive() bool { return false }

func (d *asyncDropReply) PrewriteAsync(ctx context.Context, checks []storage.AsyncCheck, observers *uint64) (uint64, []bool, error) {
	ts, conflict, err := d.Store.PrewriteAsync(ctx, checks, observers)
	if err == nil && d.drop.Add(-1) >= 0 {
		return 0, nil, fmt.Errorf("%w: reply lost", storage.ErrUnavailable)
	}
	return ts, conflict, err
}

// TestAsyncLostReply: an async prewrite call whose reply is lost once is
// sent again; the copy finds the transaction's own locks and applies
// nothing, and the commit is reported at the stamp the first copy wrote.
// Lost every time, the commit is settled from the rows: every row holds
// its lock, so it committed.
func TestAsyncLostReply(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	for _, drop := range []int64{1, 1 << 20} {
		d := &asyncDropReply{Store: e.store}
		d.drop.Store(drop)
		c := e.client(t, d, Options{Owner: fmt.Sprintf("drop%d", drop), AsyncCommit: true})
		tx, err := setAndCommit(ctx, c, "a", "v", fmt.Sprint(drop), "b", "v", fmt.Sprint(drop))
		if err != nil {
			t.Fatalf("drop %d: %v; want the commit reported", drop, err)
		}
		c.background.Wait()
		_, writes := asyncCells(t, e.store, "a", "b")
		a, b := writes[fmt.Sprintf("a/v put@%d", tx.StartTS())], writes[fmt.Sprintf("b/v put@%d", tx.StartTS())]
		if a == 0 || a != b {
			t.Fatalf("drop %d: records %v; want a and b at the first copy's stamp", drop, writes)
		}
		if v, err := readValue(ctx, c, "b", "v"); err != nil || v != fmt.Sprint(drop) {
			t.Fatalf("drop %d: b/v = %q, %v", drop, v, err)
		}
	}
}

// TestAsyncLockRecord: an async lock round-trips with its secondaries
// (bytes of every value, empty ones included) and ends in its stamp,
// which the store's stamping sets; a two-phase lock stays a version-1
// record; a truncated or mis-flagged record is corrupt, and a version
// past the async one is a FormatError.
func TestAsyncLockRecord(t *testing.T) {
	l := Lock{Op: OpPut, PrimaryRow: []byte{0, 0xff}, PrimaryCol: "c", Owner: "o", WallMS: 7, TTLMS: 9,
		Inline: true, Value: []byte("v"), Async: true,
		Secondaries: []Cell{{Row: []byte("\xff\x00row"), Col: "x"}, {Row: []byte("r2"), Col: ""}}}
	raw := encodeLock(&l)
	stamped := storage.StampValues(nil, []storage.Mutation{storage.SetCell(FamilyLock, "c", 1, raw)}, 1234)[0].Value
	got, err := decodeLock(stamped)
	if err != nil || !got.Async || got.MinCommitTS != 1234 || len(got.Secondaries) != 2 ||
		string(got.Secondaries[0].Row) != "\xff\x00row" || got.Secondaries[1].Col != "" || string(got.Value) != "v" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if two := encodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("r"), PrimaryCol: "c"}); two[0] != recordVersion {
		t.Fatalf("a two-phase lock written at version %d", two[0])
	}
	for name, b := range map[string][]byte{
		"truncated stamp": stamped[:len(stamped)-1],
		"trailing byte":   append(append([]byte(nil), stamped...), 0),
		"flag without version": func() []byte {
			b := append([]byte(nil), stamped...)
			b[0] = recordVersion
			return b
		}(),
	} {
		if _, err := decodeLock(b); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v; want a corrupt record", name, err)
		}
	}
	newer := append([]byte(nil), stamped...)
	newer[0] = asyncLockVersion + 1
	if _, err := decodeLock(newer); !errors.Is(err, ErrFormat) {
		t.Errorf("a newer version: %v; want ErrFormat", err)
	}
}

// lossyAsync is the embedded store as a network would deliver its async
// prewrites and one-phase commits: a call fails before it applies, or
// applies and loses its reply, or is delivered once more later, after
// calls that followed it (a retry whose first copy was delayed). A
// one-phase commit refused while such a copy is still on its way is
// reported as unknown, as remote.Store reports a refusal answered to a
// resend (storage.OnePhaser): a refusal is final only when no copy of
// the call may still apply. Every other call goes to the store as it
// is. shared makes it a store the client does not own (no index: every
// call as over a server).
type lossyAsync struct {
	*pebble.Store
	shared bool
	mu     sync.Mutex
	rng    *rand.Rand
	late   []func()
	faults map[string]int
}

func (l *lossyAsync) Exclusive() bool { return !l.shared && l.Store.Exclusive() }

// roll, under l.mu, reports whether a fault of probability p strikes.
func (l *lossyAsync) roll(p float64) bool { return l.rng.Float64() < p }

func (l *lossyAsync) call(apply func() (uint64, []bool, error), again func()) (uint64, []bool, error) {
	return l.callResent(apply, again, false)
}

// callResent is call; refusedUnknown reports a refusal of a call whose
// delayed copy is still on its way as storage.ErrUnavailable.
func (l *lossyAsync) callResent(apply func() (uint64, []bool, error), again func(), refusedUnknown bool) (uint64, []bool, error) {
	l.mu.Lock()
	var deliver func()
	if n := len(l.late); n > 0 && l.rng.IntN(4) == 0 {
		deliver, l.late = l.late[0], l.late[1:]
	}
	fail, lose, dup := l.roll(0.05), l.roll(0.05), l.roll(0.1)
	if dup {
		l.late = append(l.late, again)
		l.faults["duplicated"]++
	}
	if fail {
		l.faults["failed"]++
	} else if lose {
		l.faults["lost"]++
	}
	l.mu.Unlock()
	if deliver != nil {
		deliver()
	}
	if fail {
		return 0, nil, fmt.Errorf("%w: injected before the call", storage.ErrUnavailable)
	}
	ts, conflict, err := apply()
	if err == nil && lose {
		return 0, nil, fmt.Errorf("%w: injected, the reply lost", storage.ErrUnavailable)
	}
	if err == nil && dup && refusedUnknown && !slices.Contains(conflict, false) {
		return 0, nil, fmt.Errorf("%w: injected, refused when sent again while an earlier copy is delayed", storage.ErrUnavailable)
	}
	return ts, conflict, err
}

func (l *lossyAsync) PrewriteAsync(ctx context.Context, checks []storage.AsyncCheck, observers *uint64) (uint64, []bool, error) {
	late := context.WithoutCancel(ctx)
	return l.call(func() (uint64, []bool, error) { return l.Store.PrewriteAsync(ctx, checks, observers) },
		func() { _, _, _ = l.Store.PrewriteAsync(late, checks, observers) })
}

func (l *lossyAsync) PrewriteAsyncGuarded(ctx context.Context, checks []storage.AsyncCheck, conds []storage.Cond, guard func() error) (uint64, []bool, error) {
	late := context.WithoutCancel(ctx)
	return l.call(func() (uint64, []bool, error) { return l.Store.PrewriteAsyncGuarded(ctx, checks, conds, guard) },
		// A late copy is decided by the store: the index's conds may have
		// moved on since.
		func() { _, _, _ = l.Store.PrewriteAsyncGuarded(late, checks, nil, nil) })
}

func (l *lossyAsync) CommitOnePhase(ctx context.Context, row []byte, predicate storage.Filter, mutations, stamped []storage.Mutation, observers *uint64) (uint64, bool, error) {
	late := context.WithoutCancel(ctx)
	return onePhaseResult(l.callResent(func() (uint64, []bool, error) {
		return onePhaseCall(l.Store.CommitOnePhase(ctx, row, predicate, mutations, stamped, observers))
	}, func() { _, _, _ = l.Store.CommitOnePhase(late, row, predicate, mutations, stamped, observers) }, true))
}

func (l *lossyAsync) CommitOnePhaseGuarded(ctx context.Context, row []byte, cond storage.Cond, predicate storage.Filter, mutations, stamped []storage.Mutation, guard func() error) (uint64, bool, error) {
	late := context.WithoutCancel(ctx)
	return onePhaseResult(l.callResent(func() (uint64, []bool, error) {
		return onePhaseCall(l.Store.CommitOnePhaseGuarded(ctx, row, cond, predicate, mutations, stamped, guard))
		// A late copy is the same call: its predicate is only the write
		// records' half, the lock half is cond's (the index's, read when
		// the copy lands).
	}, func() { _, _, _ = l.Store.CommitOnePhaseGuarded(late, row, cond, predicate, mutations, stamped, guard) }, true))
}

// onePhaseCall and onePhaseResult carry a one-phase commit's result
// through lossyAsync.call.
func onePhaseCall(ts uint64, conflict bool, err error) (uint64, []bool, error) {
	return ts, []bool{conflict}, err
}

func onePhaseResult(ts uint64, conflict []bool, err error) (uint64, bool, error) {
	return ts, len(conflict) == 1 && conflict[0], err
}

// flush delivers every late copy still held.
func (l *lossyAsync) flush() {
	l.mu.Lock()
	late := l.late
	l.late = nil
	l.mu.Unlock()
	for _, f := range late {
		f()
	}
}

// TestHistoryAsync runs the append history with async commit on, owned
// (the index decides the predicates) and shared, over a store whose
// async prewrites and one-phase commits fail, lose their replies and
// arrive again late: every committed transaction is whole in the final
// state and in every snapshot, an aborted one nowhere.
func TestHistoryAsync(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			seed := historySeed(t)
			e := newOnePhaseEnv(t)
			l := &lossyAsync{Store: e.store, shared: shared, rng: rand.New(rand.NewPCG(seed, 7)), faults: map[string]int{}}
			c := e.client(t, l, Options{AsyncCommit: true, LockTTL: 200 * time.Millisecond, InlineSize: 4})
			h := runHistory(t, c, seed, 8, 150)
			c.background.Wait()
			l.flush()
			h.check(t, finalState(t, c))
			if s := c.Stats(); s.Async == 0 || s.OnePhase == 0 {
				t.Errorf("stats %+v: no async commit, or no one-phase commit", s)
			}
			t.Logf("faults %v, stats %+v", l.faults, c.Stats())
		})
	}
}

// TestNewestTimestampCountsAsyncStamps: an async commit whose locks are
// in (the transaction committed at their stamp m) but whose commit
// records are not yet written holds m only inside its lock values.
// NewestTimestamp, the oracle's Recover for a store without a mark, must
// count it: an oracle that resumed at the locks' start_ts would hand m
// out again (invariant 1), and a transaction begun after the Commit
// returned would not see it.
func TestNewestTimestampCountsAsyncStamps(t *testing.T) {
	ctx := context.Background()
	e := newOnePhaseEnv(t)
	tx, _ := crashedAsync(t, e, crashAfterAsyncPrewrite, false)
	locks, _ := asyncCells(t, e.store, "a", "b")
	if len(locks) != 2 {
		t.Fatalf("locks %+v; want the two async locks", locks)
	}
	stamp := max(locks[0].MinCommitTS, locks[1].MinCommitTS)
	if stamp <= tx.StartTS() {
		t.Fatalf("stamp %d not above start_ts %d", stamp, tx.StartTS())
	}
	newest, err := NewestTimestamp(ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	// The consequence: the store's oracle, opened on this store without a
	// mark, resumes above newest and hands the committed transaction's
	// commit timestamp out again; a read-only transaction begun after
	// the commit returned misses it.
	alloc, err := oracle.OpenStoreAllocator(ctx, e.store, oracle.StoreOptions{Owner: "recovered", Exclusive: true,
		Recover: func(ctx context.Context) (uint64, error) { return NewestTimestamp(ctx, e.store) }})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	r, err := NewClient(ctx, notOwned{e.store}, oracle.NewClient(alloc), coord.NewLocal(), Options{Owner: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rd, err := r.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, rerr := rd.Get(ctx, "a", "v")
	if newest < stamp || rd.StartTS() <= stamp || string(v) != "new" {
		t.Fatalf("NewestTimestamp = %d, below the committed async transaction's stamp (its commit_ts) %d; "+
			"an oracle recovered from it began a transaction at %d <= %d, which read a/v = %q, %v (want \"new\": the commit returned before it began)",
			newest, stamp, rd.StartTS(), stamp, v, errors.Unwrap(rerr))
	}
}
