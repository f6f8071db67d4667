package txn_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/oracle"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// quiet discards the logs of the servers and clients of these tests.
var quiet = slog.New(slog.DiscardHandler)

// rig is an in-process server on a crashable in-memory filesystem whose
// power the test can cut: the server dies, and a new one opens what the
// old one had synced, at the same address.
type rig struct {
	t  testing.TB
	mu struct {
		sync.Mutex
		fs  *vfs.MemFS
		srv *servertest.Server
	}
}

func newRig(t testing.TB) *rig {
	r := &rig{t: t}
	r.mu.fs = vfs.NewCrashableMem()
	// The server creates /db/store itself: pebble.Open syncs the entries
	// of the directories it creates, so a power cut keeps the new store.
	r.mu.srv = servertest.Start(t, server.Options{FS: r.mu.fs, Dir: "/db", Logger: quiet}, "")
	return r
}

func (r *rig) addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.srv.Addr
}

// powerCut keeps exactly what the server synced (CrashClone with no
// unsynced data), kills the server, and serves the clone at the same
// address. The clone is taken before Kill: Kill closes the store, which
// a power cut does not.
func (r *rig) powerCut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clone := r.mu.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	addr := r.mu.srv.Addr
	r.mu.srv.Kill()
	r.mu.fs = clone
	r.mu.srv = servertest.Start(r.t, server.Options{FS: clone, Dir: "/db", Logger: quiet}, addr)
}

// store is the running server's own store, for the mutant that commits
// without the epoch check.
func (r *rig) store() *pebble.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.srv.Store()
}

// cutStore is the writer's store: the remote store (embedded, so every
// capability of it is forwarded) with the scenario hooked to the replies
// of the transaction's prewrite calls (storage.Epoched), which the server
// answers before their log sync:
//
//  1. After the first call that prewrote the primary is acknowledged,
//     another client's durable write lands: its log sync covers all that
//     call wrote.
//  2. After the call that prewrote the secondary is acknowledged, the
//     power is cut and the server restarts on what was synced. That call
//     is the first (together: both rows' prewrites are durable), or a later
//     one, after the secondary was blocked by a stale lock and the
//     client resolved it (apart: only the secondary's prewrite is lost).
//     The reply is then lost (ackLost: txn re-sends the prewrites, to the
//     new server) or delivered (the client goes on to commit, on the new
//     server).
//
// mutant sends the commit point straight to the server's store, without
// the epoch check: a server that commits whatever its run.
type cutStore struct {
	*remote.Store
	rig                *rig
	primary, secondary string
	ackLost, mutant    bool
	primaryAcked       atomic.Bool
	secondaryAcked     atomic.Bool
}

// isPrewrite: a prewrite is the only protocol call that writes a lock in
// its ifFalse branch (txn/prewrite.go).
func isPrewrite(ifTrue, ifFalse []storage.Mutation) bool {
	if len(ifTrue) > 0 {
		return false
	}
	for _, m := range ifFalse {
		if m.Kind == storage.Put && m.Family == txn.FamilyLock {
			return true
		}
	}
	return false
}

// CheckAndMutateRowsDeferred implements storage.Epoched: txn sends a
// transaction's prewrites through it.
func (s *cutStore) CheckAndMutateRowsDeferred(ctx context.Context, checks []storage.RowCheck) ([]bool, uint64, error) {
	matched, epoch, err := s.Store.CheckAndMutateRowsDeferred(ctx, checks)
	if err != nil {
		return matched, epoch, err
	}
	prewrote := func(row string) bool {
		for i, ch := range checks {
			if string(ch.Row) == row && isPrewrite(ch.IfTrue, ch.IfFalse) && !matched[i] {
				return true
			}
		}
		return false
	}
	if prewrote(s.primary) && s.primaryAcked.CompareAndSwap(false, true) {
		err = s.Store.Mutate(ctx, []byte("another client"), storage.SetCell("other", "c", 1, []byte("x")))
	}
	if err == nil && prewrote(s.secondary) && s.secondaryAcked.CompareAndSwap(false, true) {
		s.rig.powerCut()
		if s.ackLost {
			err = fmt.Errorf("%w: the reply was lost in a power cut (test)", rpc.ErrUnavailable)
		}
	}
	return matched, epoch, err
}

// CheckAndMutateInEpoch implements storage.Epoched: txn sends its commit
// point through it.
func (s *cutStore) CheckAndMutateInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then []storage.RowMutation) (bool, error) {
	if s.mutant {
		return s.rig.store().CheckAndMutateThen(ctx, check, then, nil)
	}
	return s.Store.CheckAndMutateInEpoch(ctx, epoch, check, then)
}

// CommitInEpoch implements storage.EpochStamper: txn sends its commit
// point through it where the server takes the commit timestamp.
func (s *cutStore) CommitInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then, stamped []storage.RowMutation, observers *uint64) (uint64, bool, error) {
	if s.mutant {
		return s.rig.store().CommitInEpochGuarded(ctx, check, then, stamped, nil, nil)
	}
	return s.Store.CommitInEpoch(ctx, epoch, check, then, stamped, observers)
}

// restartCase is one interleaving of TestRemoteRestartDurability.
type restartCase struct {
	apart   bool // the secondary is prewritten in a call of its own (cutStore)
	ackLost bool // the secondary prewrite's reply is lost in the first cut
	// early: the second cut comes right after the commit point; else
	// after Commit returned.
	early  bool
	inline bool // values travel in the lock and commit records
}

func (rc restartCase) String() string {
	s := "together"
	if rc.apart {
		s = "apart"
	}
	if rc.ackLost {
		s += "/ack-lost"
	} else {
		s += "/ack-delivered"
	}
	if rc.early {
		s += "/cut-at-commit"
	} else {
		s += "/cut-after-commit"
	}
	if rc.inline {
		return s + "/inline"
	}
	return s + "/data-column"
}

func restartCases() []restartCase {
	var cases []restartCase
	for _, apart := range []bool{false, true} {
		for _, ackLost := range []bool{false, true} {
			for _, early := range []bool{false, true} {
				for _, inline := range []bool{false, true} {
					cases = append(cases, restartCase{apart: apart, ackLost: ackLost, early: early, inline: inline})
				}
			}
		}
	}
	return cases
}

// restartResult is what one run of a restartCase observed.
type restartResult struct {
	commitErr error
	violation error // atomicity or durability broken; nil if not
}

// TestRemoteRestartDurability: over RPC the server answers a
// transaction's prewrites before their log sync, and may restart before
// the commit point, losing some; the commit point carries the epoch of
// the prewrites and is refused in another (doc.go, "Durability over
// RPC"). A two-row transaction through the remote store: after the
// secondary's prewrite is acknowledged the server loses its power and
// restarts (the reply lost and the prewrites re-sent, or delivered); the
// client commits on the new server; the power is cut again at the
// commit point or after Commit returned. Commit must return nil or a
// conflict (never success for what was lost), and after the last restart
// readers see all of the transaction or none, all of it if Commit
// returned nil. Where the re-sent prewrites all land in the new run
// (together, ack lost) it must commit.
func TestRemoteRestartDurability(t *testing.T) {
	for _, rc := range restartCases() {
		t.Run(rc.String(), func(t *testing.T) {
			res := runRestart(t, rc, false)
			switch {
			case res.commitErr != nil && !errors.Is(res.commitErr, txn.ErrConflict):
				t.Errorf("Commit: %v; want nil or a conflict", res.commitErr)
			case res.commitErr != nil && !rc.apart && rc.ackLost:
				t.Errorf("Commit: %v; want nil (the re-sent prewrites landed in the new run)", res.commitErr)
			}
			if res.violation != nil {
				t.Error(res.violation)
			}
		})
	}
}

// TestRemoteRestartDurabilityMutant is what breaks without the epoch
// check: the same scenario against a server that commits whatever the
// run its prewrites were acknowledged in. Where the secondary's
// prewrite, acknowledged, was lost in the cut and the primary's survived
// (apart, reply delivered), the commit point applies on the new server
// and the secondary's commit record points at data that is gone: a
// reader fails on it, or sees half the transaction. The test above must
// catch that, so here it must happen at least once. (With inline values
// the secondary's commit record carries its value, and the loss does not
// show.)
func TestRemoteRestartDurabilityMutant(t *testing.T) {
	failed := 0
	for _, rc := range restartCases() {
		t.Run(rc.String(), func(t *testing.T) {
			res := runRestart(t, rc, true)
			t.Logf("mutant: commit %v; violation: %v", res.commitErr, res.violation)
			if res.violation != nil {
				failed++
			}
		})
	}
	if failed == 0 {
		t.Fatal("the durability check never failed against a commit point without the epoch check: it cannot fail")
	}
}

// runRestart runs one interleaving: rows p (the primary) and s hold v0,
// committed durably; a transaction writes v1 to both through a cutStore.
func runRestart(t *testing.T, rc restartCase, mutant bool) restartResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t)
	conn := servertest.Dial(t, r.addr(), rpc.DialOptions{RetryBudget: 20 * time.Second})
	rs := servertest.Store(t, conn, remote.Options{})
	if _, ok := any(rs).(storage.Deferred); ok {
		t.Fatal("storage/remote implements storage.Deferred: txn would defer prewrites over RPC without an epoch (doc.go, \"Durability over RPC\")")
	}
	orc := oracleremote.NewClient(conn)
	opts := txn.Options{LockTTL: 2 * time.Second, Logger: quiet}
	if !rc.inline {
		opts.InlineSize = -1
	}
	if err := writeBoth(ctx, newClient(t, rs, orc, opts), "v0"); err != nil {
		t.Fatalf("writing v0: %v", err)
	}
	if rc.apart {
		staleLock(ctx, t, rs, orc, "s")
	}
	ws := &cutStore{Store: rs, rig: r, primary: "p", secondary: "s", ackLost: rc.ackLost, mutant: mutant}
	c := newClient(t, ws, orc, opts)
	txn.SetCrashHook(c, func(point string) bool {
		if point == txn.CrashAfterPrimaryCommit && rc.early {
			r.powerCut()
			return true // the client dies too
		}
		return false
	})
	var res restartResult
	res.commitErr = writeBoth(ctx, c, "v1")
	if !ws.secondaryAcked.Load() {
		t.Fatalf("the secondary's prewrite was never acknowledged (Commit: %v)", res.commitErr)
	}
	if !rc.early {
		r.powerCut()
	}
	reader := newClient(t, rs, orc, opts)
	res.violation = checkAtomic(ctx, t, reader, res.commitErr)
	return res
}

// staleLock leaves a lock on (row, c) of a transaction whose client died
// after its prewrite, expired by the time the test's transaction meets it:
// that transaction's prewrite of row is blocked until it resolves it.
func staleLock(ctx context.Context, t *testing.T, st storage.Store, orc *oracle.Client, row string) {
	t.Helper()
	dead := newClient(t, st, orc, txn.Options{LockTTL: time.Millisecond, Logger: quiet, TwoPhaseOnly: true})
	txn.SetCrashHook(dead, func(point string) bool { return point == txn.CrashAfterPrimaryPrewrite })
	tx, err := dead.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set(row, "c", []byte("stale")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the crashed transaction committed")
	}
	// Past its TTL (1ms, and what its size adds, under 20ms): a reader
	// judges it dead.
	time.Sleep(50 * time.Millisecond)
}

func newClient(t testing.TB, st storage.Store, orc txn.Oracle, opts txn.Options) *txn.Client {
	t.Helper()
	c, err := txn.NewClient(context.Background(), st, orc, coord.TTLOnly{}, opts)
	if err != nil {
		t.Fatalf("txn.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// writeBoth commits v to (p, c), the primary, and (s, c).
func writeBoth(ctx context.Context, c *txn.Client, v string) error {
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	if err := errors.Join(tx.Set("p", "c", []byte(v)), tx.Set("s", "c", []byte(v))); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// checkAtomic reads p and s in one snapshot: both must hold v1 (committed)
// or both v0 (absent), and v1 if Commit returned nil.
// A Get that fails (a commit record whose data is gone) counts as neither.
func checkAtomic(ctx context.Context, t testing.TB, c *txn.Client, commitErr error) error {
	t.Helper()
	tx, err := c.BeginReadOnly(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	p, perr := tx.Get(ctx, "p", "c")
	s, serr := tx.Get(ctx, "s", "c")
	got := fmt.Sprintf("p=%q (%v), s=%q (%v)", p, perr, s, serr)
	committed := perr == nil && serr == nil && string(p) == "v1" && string(s) == "v1"
	absent := perr == nil && serr == nil && string(p) == "v0" && string(s) == "v0"
	switch {
	case !committed && !absent:
		return fmt.Errorf("after the restart the transaction is neither committed nor absent: %s (Commit: %v)", got, commitErr)
	case commitErr == nil && !committed:
		return fmt.Errorf("Commit returned nil but the transaction is absent after the restart: %s", got)
	}
	return nil
}

// TestEpochCrashPoints: a client over a server dies at each point of its
// commit (after its prewrites, all in one call answered before their
// sync; just before its commit point; after it, which carries the
// secondaries' commits too); once its locks expire a reader sees the
// transaction whole or not at all, as the point says, and leaves no lock.
func TestEpochCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		point     string
		committed bool
	}{
		{txn.CrashAfterPrimaryPrewrite, false},
		{txn.CrashAfterSessionCheck, false},
		{txn.CrashAfterPrimaryCommit, true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv := servertest.Start(t, server.Options{Logger: quiet}, "")
			conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
			rs := servertest.Store(t, conn, remote.Options{})
			orc := oracleremote.NewClient(conn)
			if err := writeBoth(ctx, newClient(t, rs, orc, txn.Options{Logger: quiet}), "v0"); err != nil {
				t.Fatal(err)
			}
			dying := newClient(t, rs, orc, txn.Options{LockTTL: time.Millisecond, Logger: quiet})
			txn.SetCrashHook(dying, func(point string) bool { return point == tc.point })
			err := writeBoth(ctx, dying, "v1")
			if tc.committed != (err == nil) {
				t.Fatalf("Commit at %s: %v", tc.point, err)
			}
			time.Sleep(50 * time.Millisecond) // past the locks' TTL (1ms and what their size adds)
			reader := newClient(t, rs, orc, txn.Options{Logger: quiet})
			commitErr := error(errCrashedCommit)
			if tc.committed {
				commitErr = nil
			}
			if v := checkAtomic(ctx, t, reader, commitErr); v != nil {
				t.Fatal(v)
			}
			tx, _ := reader.BeginReadOnly(ctx)
			p, _ := tx.Get(ctx, "p", "c")
			if want := map[bool]string{true: "v1", false: "v0"}[tc.committed]; string(p) != want {
				t.Fatalf("p = %q after a crash at %s, want %q", p, tc.point, want)
			}
			locks, err := reader.Locks(ctx)
			if err != nil || len(locks) != 0 {
				t.Fatalf("locks left after the reader: %v, %v", locks, err)
			}
		})
	}
}

// errCrashedCommit stands for the commit a crash cut short (checkAtomic
// then accepts either outcome).
var errCrashedCommit = errors.New("the client crashed")

// TestReadThroughLocksOverServer: over a server, a reader that begins
// after a commit's prewrites and meets its secondary's lock pushes the
// primary and reads the old value at once, and the transaction commits
// above the reader. Where the client took its commit timestamp before
// the reader began (an older server: the commit point is
// CheckAndMutateInEpoch, its unless a RowCheck's), the commit point at
// the old timestamp is refused and sent again at a new one; where the
// server stamps it (CommitInEpoch), it takes one above the push under
// the latch, with no refusal. A second reader dies right after its push
// (CrashAfterPush): the push stands, and the next commit still commits
// above it, whole.
func TestReadThroughLocksOverServer(t *testing.T) {
	for _, stamped := range []bool{true, false} {
		t.Run(map[bool]string{true: "stamped", false: "client-timestamp"}[stamped], func(t *testing.T) {
			testReadThroughLocksOverServer(t, stamped)
		})
	}
}

func testReadThroughLocksOverServer(t *testing.T, stamped bool) {
	ctx := context.Background()
	r := newRig(t)
	conn := servertest.Dial(t, r.addr(), rpc.DialOptions{RetryBudget: 20 * time.Second})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	opts := txn.Options{LockTTL: 10 * time.Second, Logger: quiet, ReadThroughLocks: true}
	if err := writeBoth(ctx, newClient(t, rs, orc, opts), "v0"); err != nil {
		t.Fatal(err)
	}
	for i, crash := range []bool{false, true} {
		reader := newClient(t, rs, orc, opts)
		if crash {
			txn.SetCrashHook(reader, func(point string) bool { return point == txn.CrashAfterPush })
		}
		var readTS uint64
		var readErr error
		var read []byte
		w := newClient(t, rs, orc, opts)
		if !stamped {
			txn.StampNoCommits(w)
		}
		txn.SetCrashHook(w, func(point string) bool {
			if point == txn.CrashAfterSessionCheck && readTS == 0 {
				tx, err := reader.Begin(ctx)
				if err != nil {
					t.Error(err)
					return false
				}
				readTS = tx.StartTS()
				read, readErr = tx.Get(ctx, "s", "c")
			}
			return false
		})
		want := fmt.Sprintf("v%d", i+1)
		if err := writeBoth(ctx, w, want); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		switch {
		case crash && readErr == nil:
			t.Fatalf("the reader's Get went on after its crash point: %q", read)
		case !crash && (readErr != nil || string(read) != fmt.Sprintf("v%d", i)):
			t.Fatalf("read through the lock: %q, %v; want v%d", read, readErr, i)
		}
		switch {
		case !stamped && w.Stats().Repushed == 0:
			t.Fatalf("the commit point below the reader (start_ts %d) was not refused", readTS)
		case stamped && w.Stats().Repushed != 0:
			t.Fatalf("a stamped commit point was refused %d times", w.Stats().Repushed)
		}
		rec, err := rs.ReadRow(ctx, []byte("p"), storage.Filter{{Family: txn.FamilyWrite, Qualifier: "c", Limit: 1}})
		if err != nil || len(rec.Cells) != 1 || rec.Cells[0].TS <= readTS {
			t.Fatalf("commit %d's record of p: %v, %v; want one above the reader's start_ts %d", i, rec.Cells, err, readTS)
		}
		late := newClient(t, rs, orc, opts)
		tx, _ := late.Begin(ctx)
		for _, row := range []string{"p", "s"} {
			if v, err := tx.Get(ctx, row, "c"); err != nil || string(v) != want {
				t.Fatalf("after commit %d, %s: %q, %v; want %s", i, row, v, err, want)
			}
		}
		pr, err := rs.ReadRow(ctx, []byte("p"), storage.Filter{{Family: txn.FamilyPush, AllQualifiers: true}})
		if err != nil || len(pr.Cells) != 0 {
			t.Fatalf("push cells left after commit %d: %v, %v", i, pr.Cells, err)
		}
	}
}

// olderServerStore is a server's store that takes no commit point whose
// timestamp the server stamps, as a server older than CommitInEpoch.
type olderServerStore struct {
	*remote.Store
	asked atomic.Int64
}

func (s *olderServerStore) CommitInEpoch(context.Context, uint64, storage.RowCheck, []storage.RowMutation, []storage.RowMutation, *uint64) (uint64, bool, error) {
	s.asked.Add(1)
	return 0, false, fmt.Errorf("%w: an older server (test)", storage.ErrNoOnePhase)
}

// TestCommitOlderServer: against a server that takes no stamped commit
// point, a commit takes its timestamp itself and commits whole, and the
// client does not ask again.
func TestCommitOlderServer(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	conn := servertest.Dial(t, r.addr(), rpc.DialOptions{})
	rs := &olderServerStore{Store: servertest.Store(t, conn, remote.Options{})}
	c := newClient(t, rs, oracleremote.NewClient(conn), txn.Options{Logger: quiet})
	for i := range 3 {
		if err := writeBoth(ctx, c, fmt.Sprintf("v%d", i)); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if n := rs.asked.Load(); n != 1 {
		t.Fatalf("the client asked the older server for a stamped commit %d times, want once", n)
	}
	tx, _ := newClient(t, rs, oracleremote.NewClient(conn), txn.Options{Logger: quiet}).Begin(ctx)
	for _, row := range []string{"p", "s"} {
		if v, err := tx.Get(ctx, row, "c"); err != nil || string(v) != "v2" {
			t.Fatalf("%s: %q, %v; want v2", row, v, err)
		}
	}
}

// lostCommitReply applies the first n stamped commit points it is sent
// and drops their replies, as a connection cut after the server answered
// would: the client learns nothing of them, not even the timestamp.
type lostCommitReply struct {
	*remote.Store
	lose    atomic.Int64
	applied atomic.Int64 // stamped calls that applied
}

func (s *lostCommitReply) CommitInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then, stamped []storage.RowMutation, observers *uint64) (uint64, bool, error) {
	ts, ok, err := s.Store.CommitInEpoch(ctx, epoch, check, then, stamped, observers)
	if err == nil && ok {
		s.applied.Add(1)
	}
	if err == nil && s.lose.Add(-1) >= 0 {
		return 0, false, fmt.Errorf("%w: the reply was lost (test)", rpc.ErrUnavailable)
	}
	return ts, ok, err
}

// TestStampedCommitReplyLost: a stamped commit point applied whose reply
// is lost (and the copy sent again finds the lock gone, its reply lost
// too) is a commit: the client reads its own commit record from the
// primary, at the timestamp the server took, Commit returns nil, and a
// reader after it sees both rows, committed at that timestamp.
func TestStampedCommitReplyLost(t *testing.T) {
	ctx := context.Background()
	for _, lost := range []int64{1, 2} {
		t.Run(fmt.Sprintf("%d lost", lost), func(t *testing.T) {
			r := newRig(t)
			conn := servertest.Dial(t, r.addr(), rpc.DialOptions{})
			st := &lostCommitReply{Store: servertest.Store(t, conn, remote.Options{})}
			st.lose.Store(lost)
			orc := oracleremote.NewClient(conn)
			c := newClient(t, st, orc, txn.Options{Logger: quiet})
			if err := writeBoth(ctx, c, "v1"); err != nil {
				t.Fatalf("Commit after its stamped commit point's reply was lost: %v", err)
			}
			if n := st.applied.Load(); n != 1 {
				t.Fatalf("%d stamped commit points applied, want 1", n)
			}
			txn.AwaitBackground(c)
			var ts [2]uint64
			for i, row := range []string{"p", "s"} {
				rec, err := st.ReadRow(ctx, []byte(row), storage.Filter{{Family: txn.FamilyWrite, AllQualifiers: true}, {Family: txn.FamilyLock, AllQualifiers: true}})
				if err != nil || len(rec.Cells) != 1 || rec.Cells[0].Family != txn.FamilyWrite {
					t.Fatalf("%s: %v, %v; want one commit record and no lock", row, rec.Cells, err)
				}
				ts[i] = rec.Cells[0].TS
			}
			if ts[0] != ts[1] {
				t.Fatalf("the rows committed at %d and %d, want one timestamp", ts[0], ts[1])
			}
			tx, _ := newClient(t, st, orc, txn.Options{Logger: quiet}).Begin(ctx)
			for _, row := range []string{"p", "s"} {
				if v, err := tx.Get(ctx, row, "c"); err != nil || string(v) != "v1" {
					t.Fatalf("%s: %q, %v; want v1", row, v, err)
				}
			}
		})
	}
}

// freshCounter counts a server store's fresh reads; refuse makes it a
// server older than them.
type freshCounter struct {
	*remote.Store
	fresh  atomic.Int64
	refuse bool
}

func (s *freshCounter) ReadRowsFresh(ctx context.Context, reads []storage.RowRead) (uint64, []storage.Row, error) {
	s.fresh.Add(1)
	if s.refuse {
		return 0, nil, fmt.Errorf("%w: an older server (test)", storage.ErrNoOnePhase)
	}
	return s.Store.ReadRowsFresh(ctx, reads)
}

// countingOracle counts the timestamps a client asks its oracle for.
type countingOracle struct {
	txn.Oracle
	calls atomic.Int64
}

func (o *countingOracle) Timestamp(ctx context.Context) (uint64, error) {
	o.calls.Add(1)
	return o.Oracle.Timestamp(ctx)
}

// TestDeferredStart: over a server, a transaction begun with
// BeginDeferred takes its start timestamp with its first read, in one
// call: it sees what committed before it began, asks the oracle for
// nothing (its commit timestamp is the server's too), and commits; a
// single Get does the same. A deferred transaction that writes without
// reading, or asks for StartTS first, takes one from the oracle; one
// rolled back before any read takes none and holds back no safe point.
// Against a server older than the call it falls back to the oracle, and
// the client does not ask again.
func TestDeferredStart(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	conn := servertest.Dial(t, r.addr(), rpc.DialOptions{})
	st := &freshCounter{Store: servertest.Store(t, conn, remote.Options{})}
	orc := &countingOracle{Oracle: oracleremote.NewClient(conn)}
	if err := writeBoth(ctx, newClient(t, st, orc, txn.Options{Logger: quiet}), "v1"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, st, orc, txn.Options{Logger: quiet})
	orc.calls.Store(0)

	tx, err := c.BeginDeferred(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := tx.GetMany(ctx, []txn.CellKey{{Row: "p", Column: "c"}, {Row: "s", Column: "c"}})
	if err != nil || string(vs[0]) != "v1" || string(vs[1]) != "v1" {
		t.Fatalf("the first reads: %q, %v; want v1 twice", vs, err)
	}
	if ts, oldest, ok := tx.StartTS(), uint64(0), false; ts == 0 || func() bool { oldest, ok = c.OldestActive(); return !ok || oldest != ts }() {
		t.Fatalf("start_ts %d, the oldest active %d (%v): want the read's, held", ts, oldest, ok)
	}
	if err := errors.Join(tx.Set("p", "c", []byte("v2")), tx.Set("s", "c", []byte("v2")), tx.Commit(ctx)); err != nil {
		t.Fatal(err)
	}
	if n, f := orc.calls.Load(), st.fresh.Load(); n != 0 || f != 1 {
		t.Fatalf("a deferred read-write transfer asked the oracle %d times and read fresh %d times; want 0 and 1", n, f)
	}
	if _, ok := c.OldestActive(); ok {
		t.Fatal("the committed transaction still holds the safe point")
	}
	ro, _ := c.BeginDeferred(ctx, true)
	if v, err := ro.Get(ctx, "s", "c"); err != nil || string(v) != "v2" {
		t.Fatalf("a deferred Get: %q, %v; want v2", v, err)
	}
	if err := ro.Rollback(ctx); err != nil || st.fresh.Load() != 2 || orc.calls.Load() != 0 {
		t.Fatalf("a deferred Get: rollback %v, %d fresh reads, %d timestamps; want 2 and 0", err, st.fresh.Load(), orc.calls.Load())
	}

	w, _ := c.BeginDeferred(ctx, false)
	if err := errors.Join(w.Set("p", "c", []byte("v3")), w.Set("s", "c", []byte("v3")), w.Commit(ctx)); err != nil {
		t.Fatal(err)
	}
	if n := orc.calls.Load(); n != 1 {
		t.Fatalf("a deferred write-only transaction asked the oracle %d times, want once", n)
	}
	first, _ := c.BeginDeferred(ctx, true)
	if ts := first.StartTS(); ts == 0 || orc.calls.Load() != 2 {
		t.Fatalf("StartTS before any read: %d after %d timestamps; want one taken", ts, orc.calls.Load())
	}
	if v, err := first.Get(ctx, "p", "c"); err != nil || string(v) != "v3" || st.fresh.Load() != 2 {
		t.Fatalf("a Get after StartTS: %q, %v, %d fresh reads; want v3 and no fresh read", v, err, st.fresh.Load())
	}
	_ = first.Rollback(ctx)
	idle, _ := c.BeginDeferred(ctx, true)
	if err := idle.Rollback(ctx); err != nil || idle.StartTS() != 0 || orc.calls.Load() != 2 {
		t.Fatalf("rolled back before any read: %v, start_ts %d, %d timestamps; want none taken", err, idle.StartTS(), orc.calls.Load())
	}
	if _, ok := c.OldestActive(); ok {
		t.Fatal("a transaction that ended still holds the safe point")
	}

	t.Run("older server", func(t *testing.T) {
		old := &freshCounter{Store: st.Store, refuse: true}
		c := newClient(t, old, orc, txn.Options{Logger: quiet})
		for range 2 {
			tx, err := c.BeginDeferred(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			vs, err := tx.GetMany(ctx, []txn.CellKey{{Row: "p", Column: "c"}, {Row: "s", Column: "c"}})
			if err != nil || string(vs[0]) != "v3" || string(vs[1]) != "v3" {
				t.Fatalf("reads from an older server: %q, %v; want v3 twice", vs, err)
			}
			_ = tx.Rollback(ctx)
		}
		if n := old.fresh.Load(); n != 1 {
			t.Fatalf("the client asked the older server for a fresh read %d times, want once", n)
		}
	})
}
