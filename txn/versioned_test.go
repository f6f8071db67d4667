package txn_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/observer"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// holdPrewrite holds the first prewrite of column col before it is sent,
// until released.
type holdPrewrite struct {
	*remote.Store
	col              string
	once             sync.Once
	reached, release chan struct{}
	heldOnePhase     atomic.Bool // the held call was a one-phase commit
	// movedCommits counts the commit points the server refused because
	// the registry moved (CommitInEpoch).
	movedCommits atomic.Int64
}

// CommitInEpoch implements storage.EpochStamper: a server's client sends
// its commit point through it.
func (h *holdPrewrite) CommitInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then, stamped []storage.RowMutation, observers *uint64) (uint64, bool, error) {
	ts, ok, err := h.Store.CommitInEpoch(ctx, epoch, check, then, stamped, observers)
	if errors.Is(err, storage.ErrObserversMoved) {
		h.movedCommits.Add(1)
	}
	return ts, ok, err
}

func (h *holdPrewrite) CheckAndMutateIdempotent(ctx context.Context, row []byte, p storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if len(ifFalse) > 0 && ifFalse[0].Family == txn.FamilyLock && ifFalse[0].Qualifier == h.col {
		h.once.Do(func() { close(h.reached); <-h.release })
	}
	return h.Store.CheckAndMutateIdempotent(ctx, row, p, ifTrue, ifFalse)
}

// CheckAndMutateRowsDeferred implements storage.Epoched: a server's
// client sends a transaction's prewrites through it.
func (h *holdPrewrite) CheckAndMutateRowsDeferred(ctx context.Context, checks []storage.RowCheck) ([]bool, uint64, error) {
	for _, ch := range checks {
		if len(ch.IfFalse) > 0 && ch.IfFalse[0].Family == txn.FamilyLock && ch.IfFalse[0].Qualifier == h.col {
			h.once.Do(func() { close(h.reached); <-h.release })
		}
	}
	return h.Store.CheckAndMutateRowsDeferred(ctx, checks)
}

// CommitOnePhase implements storage.OnePhaser: a server's client sends a
// one-row transaction's commit through it.
func (h *holdPrewrite) CommitOnePhase(ctx context.Context, row []byte, p storage.Filter, muts, stamped []storage.Mutation, observers *uint64) (uint64, bool, error) {
	if len(stamped) > 0 && stamped[0].Qualifier == h.col {
		h.once.Do(func() { h.heldOnePhase.Store(true); close(h.reached); <-h.release })
	}
	return h.Store.CommitOnePhase(ctx, row, p, muts, stamped, observers)
}

// serverProc is a client process of a server: its store, its oracle (the
// server's, versioned: each timestamp carries the observer registry
// version) and its observer framework.
type serverProc struct {
	client *txn.Client
	f      *observer.Framework
}

func newServerProc(t *testing.T, addr string, opts txn.Options, wrap func(*remote.Store) storage.Store) *serverProc {
	t.Helper()
	ctx := context.Background()
	conn := servertest.Dial(t, addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	var st storage.Store = rs
	if wrap != nil {
		st = wrap(rs)
	}
	orc := oracleremote.NewClient(servertest.Dial(t, addr, rpc.DialOptions{}))
	opts.Logger = quiet
	c, err := txn.NewClient(ctx, st, orc, coord.TTLOnly{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	f, err := observer.New(ctx, st, c, orc, coord.NewLocalLocker(), observer.Options{Logger: quiet, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &serverProc{client: c, f: f}
}

// TestRegistryVersionWithCommitTimestamp: over a server, the registry's
// version is read where the commit timestamp is taken: by the server,
// under the latches, at the commit point (CommitInEpoch). A
// registration that lands between the writer's prewrite being built and
// sent (so its backfill finds no lock) makes the server refuse the
// commit point; the committer re-reads the registry, notifies the write
// itself and commits. The same registration landing
// while a one-phase commit of the row is in flight makes the server refuse
// it (the registry version moved), and the committer commits in two
// phases, notifying.
func TestRegistryVersionWithCommitTimestamp(t *testing.T) {
	for _, twoPhase := range []bool{true, false} {
		t.Run(map[bool]string{true: "two-phase", false: "one-phase"}[twoPhase], func(t *testing.T) {
			registrationRacesCommit(t, twoPhase)
		})
	}
}

func registrationRacesCommit(t *testing.T, twoPhase bool) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{Logger: quiet}, "")
	h := &holdPrewrite{col: "in", reached: make(chan struct{}), release: make(chan struct{})}
	writer := newServerProc(t, srv.Addr, txn.Options{TwoPhaseOnly: twoPhase}, func(rs *remote.Store) storage.Store { h.Store = rs; return h })
	registrar := newServerProc(t, srv.Addr, txn.Options{}, nil)
	done := make(chan error, 1)
	go func() {
		tx, err := writer.client.Begin(ctx)
		if err == nil {
			_ = tx.Set("r", "in", []byte("v"))
			err = tx.Commit(ctx)
		}
		done <- err
	}()
	<-h.reached
	var runs atomic.Int64
	copyTo := func(ctx context.Context, tx *txn.Txn, row, col string) error {
		v, err := tx.Get(ctx, row, col)
		if err != nil {
			return err
		}
		runs.Add(1)
		return tx.Set(row, "out", v)
	}
	if err := registrar.f.Register(ctx, observer.Observer{Name: "o", Column: "in", Fn: copyTo}); err != nil {
		t.Fatal(err)
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := registrar.f.Run(rctx, observer.WorkerOptions{Scanners: 1, Drain: true, MaxIdle: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	tx, _ := registrar.client.BeginReadOnly(ctx)
	got, err := tx.Get(ctx, "r", "out")
	if err != nil || string(got) != "v" || runs.Load() != 1 {
		t.Fatalf("out = %q (%v) after %d runs: the write that raced the registration was never notified", got, err, runs.Load())
	}
	if h.heldOnePhase.Load() == twoPhase {
		t.Fatalf("the held call was a one-phase commit: %v; want %v", h.heldOnePhase.Load(), !twoPhase)
	}
	if s := writer.client.Stats(); s.OnePhase != 0 {
		t.Fatalf("the writer's stats: %+v; want its commit, refused in one phase, made in two", s)
	}
	if n := h.movedCommits.Load(); twoPhase && n != 1 {
		t.Fatalf("the server refused %d commit points for the registry's move, want 1", n)
	}
}
