package percolator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// setAll commits value to column v of rows r0..r(n-1).
func setAll(t *testing.T, db *percolator.DB, n int, value string) {
	t.Helper()
	err := db.Update(context.Background(), func(tx *percolator.Txn) error {
		for i := range n {
			if err := tx.Set(fmt.Sprintf("r%d", i), "v", []byte(value)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGC: DB.GC on an embedded store removes every version no open
// snapshot reads, holding the safe point back to the oldest open
// transaction, which reads its snapshot whole; a dry run counts the same
// and changes nothing; a transaction begun before a safe point it was not
// holding fails with ErrSnapshotTooOld; the background collector runs
// by itself; a negative lifetime is refused.
func TestGC(t *testing.T) {
	ctx := context.Background()
	const rows = 10
	db := open(t, percolator.Options{Dir: t.TempDir(), GCLifetime: 20 * time.Millisecond, DisableGC: true})
	for _, v := range []string{"1", "2", "3"} {
		setAll(t, db, rows, v)
		if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("solo", "v", []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	long, err := db.Begin(ctx) // it writes "solo" once collected
	if err != nil {
		t.Fatal(err)
	}
	setAll(t, db, rows, "4")
	setAll(t, db, rows, "5")

	dry, err := db.GCWith(ctx, percolator.GCOptions{DryRun: true})
	// Below the open transaction: versions 1 and 2 go (a write record
	// each, holding its small value inline).
	if err != nil || !dry.DryRun || dry.Versions != (rows+1)*2 || dry.SafePoint >= long.StartTS() {
		t.Fatalf("dry run: %+v, %v; want %d versions below start_ts %d", dry, err, (rows+1)*2, long.StartTS())
	}
	if st, _ := db.GCStatus(ctx); st.SafePoint != 0 || st.OldestOpen != long.StartTS() {
		t.Fatalf("after a dry run: %+v; want no safe point, the open transaction holding", st)
	}
	res, err := db.GC(ctx)
	if err != nil || res.Versions != dry.Versions || res.SafePoint != long.StartTS()-1 {
		t.Fatalf("GC: %+v, %v; want %d versions just below %d", res, err, dry.Versions, long.StartTS())
	}
	for i := range rows {
		if v, err := long.Get(ctx, fmt.Sprintf("r%d", i), "v"); err != nil || string(v) != "3" {
			t.Fatalf("the open transaction reads %q, %v; want 3", v, err)
		}
	}
	// The transaction holding the safe point writes a collected row: the
	// row's fence is below its start_ts.
	if err := long.Set("solo", "v", []byte("long")); err != nil {
		t.Fatal(err)
	}
	if err := long.Commit(ctx); err != nil {
		t.Fatalf("the oldest open transaction's commit on a collected row: %v", err)
	}
	first := res
	res, err = db.GC(ctx)
	if err != nil || res.Versions != rows*2 || res.SafePoint <= long.StartTS() {
		t.Fatalf("GC after the transaction ended: %+v, %v; want versions 3 and 4 gone", res, err)
	}
	if got := get(t, db, "r0"); got != "5" {
		t.Fatalf("after GC: %q", got)
	}
	st, err := db.GCStatus(ctx)
	if err != nil || st.SafePoint != res.SafePoint || st.Stats.Passes != 2 || st.Stats.Versions != uint64(res.Versions+first.Versions) || st.SafePointSampled.IsZero() {
		t.Fatalf("status: %+v, %v", st, err)
	}

	// The background collector, with no call.
	bg := open(t, percolator.Options{Dir: t.TempDir(), GCLifetime: 20 * time.Millisecond})
	for _, v := range []string{"1", "2", "3"} {
		setAll(t, bg, rows, v)
	}
	for deadline := time.Now().Add(20 * time.Second); bg.GCStats().Versions < rows*2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the background collector removed nothing: %+v", bg.GCStats())
		}
	}
	if got := get(t, bg, "r0"); got != "3" {
		t.Fatalf("after background GC: %q", got)
	}

	if _, err := percolator.Open(ctx, percolator.Options{GCLifetime: -time.Second}); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("a negative lifetime: %v", err)
	}
	if _, err := server.Open(ctx, server.Options{Dir: t.TempDir(), GCLifetime: -time.Second}); err == nil {
		t.Fatal("a server with a negative lifetime opened")
	}
}

// TestGCHeldBySessions: a server's collector holds the safe point at or
// below the oldest start_ts its clients' sessions publish: an open
// transaction of a client, and one of a process that died without a word
// (its session is never renewed again), until that session expires; then
// the safe point moves past both.
func TestGCHeldBySessions(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{GCLifetime: 50 * time.Millisecond}, "")
	db := open(t, percolator.Options{Server: srv.Addr, SessionTTL: time.Second})
	setAll(t, db, 3, "1")
	long, err := db.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Rollback(ctx)
	// A process that opened a session publishing an older transaction,
	// then died: nothing renews it.
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	dead := long.StartTS() - 1
	if _, err := conn.Coord.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "dead", TtlMs: 2000, OldestStartTs: dead}); err != nil {
		t.Fatal(err)
	}
	setAll(t, db, 3, "2")
	var first uint64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := db.GCStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.SafePoint != 0 {
			if st.SafePoint > dead {
				t.Fatalf("safe point %d passed the dead session's published start_ts %d while it lived", st.SafePoint, dead)
			}
			first = st.SafePoint
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no safe point")
		}
	}
	if v, err := long.Get(ctx, "r0", "v"); err != nil || string(v) != "1" {
		t.Fatalf("the open transaction reads %q, %v", v, err)
	}
	if st, err := db.GCStatus(ctx); err != nil || st.OldestOpen != dead || st.OldestOwner != "dead" {
		t.Fatalf("status names %d of %q, %v; want the dead session's %d", st.OldestOpen, st.OldestOwner, err, dead)
	}
	_ = long.Rollback(ctx)
	// The dead session expires (2s); the next safe point comes after the
	// collector's wait past the first (txn.CollectDelay).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := db.GCStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.SafePoint > long.StartTS() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the safe point stayed at %d (first %d) after the transactions ended", st.SafePoint, first)
		}
	}
	if got := get(t, db, "r0"); got != "2" {
		t.Fatalf("after GC: %q", got)
	}
}

// TestGCOverServer: DB.GC on a server's client runs the pass on the
// server (a dry run first), and the server's status reports it.
func TestGCOverServer(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Start(t, server.Options{GCLifetime: 20 * time.Millisecond, DisableGC: true}, "")
	db := open(t, percolator.Options{Server: srv.Addr})
	for _, v := range []string{"1", "2", "3"} {
		setAll(t, db, 5, v)
	}
	dry, err := db.GCWith(ctx, percolator.GCOptions{DryRun: true})
	if err != nil || !dry.DryRun || dry.Versions != 10 || dry.Rows != 5 {
		t.Fatalf("dry run over the server: %+v, %v", dry, err)
	}
	res, err := db.GC(ctx)
	if err != nil || res.Versions != 10 {
		t.Fatalf("GC over the server: %+v, %v", res, err)
	}
	st, err := db.GCStatus(ctx)
	if err != nil || st.SafePoint != res.SafePoint || st.SafePointSampled.IsZero() {
		t.Fatalf("status over the server: %+v, %v; want safe point %d", st, err, res.SafePoint)
	}
	if got := get(t, db, "r0"); got != "3" {
		t.Fatalf("after GC: %q", got)
	}
}

// TestGCObservers: an observer's notifications survive rounds of garbage
// collection between the writes (puts and deletes) and its runs: each
// round, every row's mirror ends at the column's last state, none lost,
// and no change runs twice (the runs are counted against the changes'
// collapsing: at most one run per row per round).
func TestGCObservers(t *testing.T) {
	ctx := context.Background()
	const rows, rounds = 30, 4
	db := open(t, percolator.Options{Dir: t.TempDir(), GCLifetime: 10 * time.Millisecond, DisableGC: true})
	var mu sync.Mutex
	runs := map[string]int{}
	mirror := func(ctx context.Context, tx *percolator.Txn, row, col string) error {
		v, err := tx.Get(ctx, row, col)
		switch {
		case errors.Is(err, percolator.ErrNotFound):
			v = []byte("deleted")
		case err != nil:
			return err
		}
		mu.Lock()
		runs[row]++
		mu.Unlock()
		return tx.Set(row, "mirror", v)
	}
	if err := db.Observe(ctx, percolator.Observer{Name: "mirror", Column: "c", Fn: mirror}); err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		// Two changes per row (collapsed into one run), the last a delete
		// in odd rounds; then collect, then run the observer.
		for _, last := range []bool{false, true} {
			err := db.Update(ctx, func(tx *percolator.Txn) error {
				for i := range rows {
					row := fmt.Sprintf("r%02d", i)
					if last && round%2 == 1 {
						if err := tx.Delete(row, "c"); err != nil {
							return err
						}
						continue
					}
					if err := tx.Set(row, "c", []byte(fmt.Sprint(round, last))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.GC(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		clear(runs)
		mu.Unlock()
		if _, err := db.RunWorkers(ctx, percolator.WorkerOptions{Drain: true}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint(round, true)
		if round%2 == 1 {
			want = "deleted"
		}
		err := db.View(ctx, func(tx *percolator.Txn) error {
			for i := range rows {
				row := fmt.Sprintf("r%02d", i)
				v, err := tx.Get(ctx, row, "mirror")
				if err != nil || string(v) != want {
					return fmt.Errorf("round %d: %s mirrors %q, %v; want %q", round, row, v, err, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for row, n := range runs {
			if n > 1 {
				t.Errorf("round %d: %s ran %d times for one round's changes", round, row, n)
			}
		}
		if len(runs) != rows {
			t.Errorf("round %d: %d rows ran, want %d", round, len(runs), rows)
		}
		mu.Unlock()
	}
}
