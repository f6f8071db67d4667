package txn_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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

// movingRegistry observes nothing in its first snapshot and column "v"
// from then on, under version 2: a registration made while a commit was
// being built.
type movingRegistry struct{ calls atomic.Int64 }

func (m *movingRegistry) Snapshot() (txn.Observed, uint64) {
	if m.calls.Add(1) == 1 {
		return nil, 1
	}
	return func(col string) bool { return col == "v" }, 2
}

func (m *movingRegistry) Refresh(context.Context) (txn.Observed, uint64, error) {
	o, v := m.Snapshot()
	return o, v, nil
}

// staticRegistry observes nothing, at version.
type staticRegistry struct{ version uint64 }

func (s staticRegistry) Snapshot() (txn.Observed, uint64) { return nil, s.version }
func (s staticRegistry) Refresh(context.Context) (txn.Observed, uint64, error) {
	return nil, s.version, nil
}

// TestOnePhaseRegistryMoved: a one-phase commit built under a registry
// that observed none of its columns, where a registration of one lands
// before its timestamp is checked, applies nothing and commits in two
// phases, with the notification its prewrite carries; embedded (the
// owner's registry, checked in process) and over a server (the stored
// version, which the server reads once the timestamp is taken and
// compares). Under an unchanged registry the commit is one-phase.
func TestOnePhaseRegistryMoved(t *testing.T) {
	ctx := context.Background()
	t.Run("embedded", func(t *testing.T) {
		st, err := pebble.Open(t.TempDir(), pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer alloc.Close()
		st.SetStamper(alloc)
		c := newClient(t, st, oracle.NewClient(alloc), txn.Options{Logger: quiet})
		checkMoved(ctx, t, c)
	})
	t.Run("server", func(t *testing.T) {
		var stored atomic.Uint64
		stored.Store(2)
		srv := servertest.Start(t, server.Options{Logger: quiet,
			RegistryVersion: func(context.Context, storage.Store) (uint64, error) { return stored.Load(), nil }}, "")
		conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
		rs := servertest.Store(t, conn, remote.Options{})
		c := newClient(t, rs, oracleremote.NewClient(conn), txn.Options{Logger: quiet})
		checkMoved(ctx, t, c)
	})
}

func checkMoved(ctx context.Context, t *testing.T, c *txn.Client) {
	t.Helper()
	commit := func(row string) {
		tx, err := c.Begin(ctx)
		if err == nil {
			if err = tx.Set(row, "v", []byte("1")); err == nil {
				err = tx.Commit(ctx)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c.SetObservers(&movingRegistry{})
	commit("r")
	if s := c.Stats(); s.OnePhase != 0 || s.Commits != 1 {
		t.Fatalf("stats: %+v; want one commit, in two phases", s)
	}
	ns, err := c.Notifications().Read(ctx, []byte("r"))
	if err != nil || len(ns) == 0 {
		t.Fatalf("the notification of the newly observed column: %v, %v; want one", ns, err)
	}
	c.SetObservers(staticRegistry{version: 2}) // the server's stored version
	commit("r2")
	if s := c.Stats(); s.OnePhase != 1 {
		t.Fatalf("stats: %+v; want the commit under an unchanged registry one-phase", s)
	}
}

// TestOnePhasePowerCut: over a server on a crashable filesystem, a
// one-row transaction commits in one call; the client dies right after
// the call applied (CrashAfterOnePhase) and the server's power is cut at
// once: the commit, acknowledged durable, is there after the restart,
// whole, with no lock to resolve.
func TestOnePhasePowerCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := newRig(t)
	conn := servertest.Dial(t, r.addr(), rpc.DialOptions{RetryBudget: 20 * time.Second})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	c := newClient(t, rs, orc, txn.Options{Logger: quiet, InlineSize: -1})
	txn.SetCrashHook(c, func(point string) bool {
		if point == txn.CrashAfterOnePhase {
			r.powerCut()
			return true
		}
		return false
	})
	tx, _ := c.Begin(ctx)
	_ = tx.Set("p", "c", []byte("v1"))
	_ = tx.Set("p", "d", []byte("v1"))
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the crash hook did not run: no one-phase commit")
	}
	reader := newClient(t, rs, orc, txn.Options{Logger: quiet})
	rd, _ := reader.BeginReadOnly(ctx)
	for _, col := range []string{"c", "d"} {
		if v, err := rd.Get(ctx, "p", col); err != nil || string(v) != "v1" {
			t.Fatalf("p/%s after the power cut = %q, %v; want the acknowledged commit's v1", col, v, err)
		}
	}
	if locks, err := reader.Locks(ctx); err != nil || len(locks) != 0 {
		t.Fatalf("locks after a one-phase commit: %v, %v", locks, err)
	}
}
