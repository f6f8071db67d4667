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

// deferred is the running server's own store, for the mutant that skips
// the prewrites' log sync.
func (r *rig) deferred() storage.Deferred {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.srv.Store()
}

// cutStore is the writer's store: the remote store (embedded, so every
// capability of it is forwarded) with the scenario hooked to the replies
// of the transaction's prewrites:
//
//  1. After the primary's prewrite is acknowledged, another client's
//     durable write lands: its log sync covers the primary's lock, so only
//     the secondary's prewrite can be unsynced when the power goes.
//  2. After the secondary's prewrite is acknowledged, the power is cut
//     and the server restarts on what was synced. The reply is then lost
//     (ackLost: txn re-sends the idempotent prewrite, to the new server)
//     or delivered (the client goes on to commit, on the new server).
//
// mutant sends the prewrites straight to the server's store with
// CheckAndMutateDeferred: a server whose prewrites are not durable.
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

// CheckAndMutateIdempotent implements storage.Idempotent: txn sends every
// protocol CheckAndMutate through it.
func (s *cutStore) CheckAndMutateIdempotent(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if !isPrewrite(ifTrue, ifFalse) {
		return s.Store.CheckAndMutateIdempotent(ctx, row, pred, ifTrue, ifFalse)
	}
	send := s.Store.CheckAndMutateIdempotent
	if s.mutant {
		send = s.rig.deferred().CheckAndMutateDeferred
	}
	matched, err := send(ctx, row, pred, ifTrue, ifFalse)
	if err != nil {
		return matched, err
	}
	switch string(row) {
	case s.primary:
		if s.primaryAcked.CompareAndSwap(false, true) {
			err = s.Store.Mutate(ctx, []byte("another client"), storage.SetCell("other", "c", 1, []byte("x")))
		}
	case s.secondary:
		if s.secondaryAcked.CompareAndSwap(false, true) {
			s.rig.powerCut()
			if s.ackLost {
				err = fmt.Errorf("%w: the reply was lost in a power cut (test)", rpc.ErrUnavailable)
			}
		}
	}
	return matched, err
}

// CheckAndMutate implements storage.Store; txn does not use it on an
// Idempotent store, but if it did the scenario must still run.
func (s *cutStore) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if isPrewrite(ifTrue, ifFalse) {
		return s.CheckAndMutateIdempotent(ctx, row, pred, ifTrue, ifFalse)
	}
	return s.Store.CheckAndMutate(ctx, row, pred, ifTrue, ifFalse)
}

// restartCase is one interleaving of TestRemoteRestartDurability.
type restartCase struct {
	ackLost bool // the secondary prewrite's reply is lost in the first cut
	// early: the second cut comes right after the primary's commit, and the
	// client never commits the secondary (readers roll it forward); else
	// after Commit returned.
	early  bool
	inline bool // values travel in the lock and commit records
}

func (rc restartCase) String() string {
	s := "ack-delivered"
	if rc.ackLost {
		s = "ack-lost"
	}
	if rc.early {
		s += "/cut-before-secondaries"
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
	for _, ackLost := range []bool{false, true} {
		for _, early := range []bool{false, true} {
			for _, inline := range []bool{false, true} {
				cases = append(cases, restartCase{ackLost: ackLost, early: early, inline: inline})
			}
		}
	}
	return cases
}

// restartResult is what one run of a restartCase observed.
type restartResult struct {
	commitErr     error
	violation     error // atomicity or durability broken; nil if not
	rolledForward uint64
}

// TestRemoteRestartDurability: over RPC the server may restart between a
// client's secondary prewrite and its primary commit, so a prewrite's
// acknowledgement must mean its lock is durable (doc.go, "Durability",
// "Over RPC"). A two-row transaction through the remote store: after the
// secondary's prewrite is acknowledged the server loses its power and
// restarts (the reply lost and the prewrite re-sent, or delivered); the
// client commits on the new server; the power is cut again after the
// commit, or right after the primary's commit (readers roll forward).
// Every case must commit (all of its prewrites and its commit point were
// durable), and after the last restart readers see all of it.
func TestRemoteRestartDurability(t *testing.T) {
	for _, rc := range restartCases() {
		t.Run(rc.String(), func(t *testing.T) {
			res := runRestart(t, rc, false)
			if res.commitErr != nil {
				t.Errorf("Commit: %v; want nil (every prewrite was durable)", res.commitErr)
			}
			if res.violation != nil {
				t.Error(res.violation)
			}
			if rc.early && res.rolledForward == 0 {
				t.Error("no reader rolled the secondary forward after the restart")
			}
		})
	}
}

// TestRemoteRestartDurabilityMutant is what breaks without durable
// prewrites: the same scenario against a server that applies prewrites
// with CheckAndMutateDeferred (no log sync). The power cut takes the
// acknowledged secondary lock while the primary's, synced by another
// client's write, survives; a client that got the acknowledgement commits
// the primary, and the secondary's write is lost: a reader sees half the
// transaction (or a commit record whose data is gone). The test above
// must catch that, so here it must happen at least once. (Where the reply
// is lost, the client's re-sent prewrite restores the lock, and the
// mutant survives: the danger is the prewrites the client holds an
// acknowledgement for.)
func TestRemoteRestartDurabilityMutant(t *testing.T) {
	failed := 0
	for _, rc := range restartCases() {
		if rc.ackLost {
			continue
		}
		t.Run(rc.String(), func(t *testing.T) {
			res := runRestart(t, rc, true)
			t.Logf("mutant: commit %v; violation: %v", res.commitErr, res.violation)
			if res.violation != nil {
				failed++
			}
		})
	}
	if failed == 0 {
		t.Fatal("the durability check never failed against non-durable prewrites: it cannot fail")
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
		t.Fatal("storage/remote implements storage.Deferred: txn would defer prewrites over RPC (doc.go, \"Durability over RPC\")")
	}
	orc := oracleremote.NewClient(conn)
	opts := txn.Options{LockTTL: 2 * time.Second, Logger: quiet}
	if !rc.inline {
		opts.InlineSize = -1
	}
	if err := writeBoth(ctx, newClient(t, rs, orc, opts), "v0"); err != nil {
		t.Fatalf("writing v0: %v", err)
	}
	ws := &cutStore{Store: rs, rig: r, primary: "p", secondary: "s", ackLost: rc.ackLost, mutant: mutant}
	c := newClient(t, ws, orc, opts)
	txn.SetCrashHook(c, func(point string) bool {
		if point == txn.CrashAfterPrimaryCommit && rc.early {
			r.powerCut()
			return true // the client dies too: it never commits the secondary
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
	res.rolledForward = reader.Stats().RolledForward
	return res
}

func newClient(t testing.TB, st storage.Store, orc *oracle.Client, opts txn.Options) *txn.Client {
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
