//go:build percolator_mutants

package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// Each test runs its scenario with the mutant off, where the invariant
// holds, and on, where the scenario shows it broken, on every backend:
// the index, a shared store (the server's clients) and Bigtable. None of
// these tests may run in parallel: a mutant is on for the whole process.

// withMutant runs f with exactly the named mutants on (none: all off).
func withMutant(f func(), names ...string) {
	defer mutant.Set(names...)()
	f()
}

// mutantEnv is a store where p and s hold "old", committed.
func mutantEnv(t *testing.T, backend string) *env {
	e := newEnvBackend(t, backend)
	tx, _ := e.client("init").Begin(context.Background())
	_ = tx.Set("p", "v", []byte("old"))
	_ = tx.Set("s", "v", []byte("old"))
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func getString(t *testing.T, ctx context.Context, tx *Txn, row string) string {
	t.Helper()
	v, err := tx.Get(ctx, row, "v")
	if err != nil {
		return errString(err)
	}
	return string(v)
}

// lockReads has a writer commit p and s at commit_ts c; once c is
// handed out, and before the commit point, a reader starts at r > c and
// reads p, then scans both rows, with a short deadline. Then, with the
// writer's locks gone, it reads p again in the same snapshot.
func lockReads(t *testing.T, backend string) (during, scan, after string) {
	ctx := context.Background()
	e := mutantEnv(t, backend)
	w := e.client("writer")
	tx, _ := w.Begin(ctx)
	_ = tx.Set("p", "v", []byte("new"))
	_ = tx.Set("s", "v", []byte("new"))
	var reader *Txn
	w.crash = func(point string) bool {
		if point != crashAfterSessionCheck {
			return false
		}
		reader, _ = e.client("reader").BeginReadOnly(ctx)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		during = getString(t, short, reader, "p")
		kvs, err := reader.Scan(short, "", "", "v", 0)
		scan = errString(err)
		for _, kv := range kvs {
			scan += " " + string(kv.Row) + "=" + string(kv.Value)
		}
		return false
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, err := w.latestCommitTS(ctx, []byte("p"), "v"); err != nil || ts >= reader.StartTS() {
		t.Fatalf("commit_ts %d not below the reader's start_ts %d", ts, reader.StartTS())
	}
	return during, scan, getString(t, ctx, reader, "p")
}

// TestSkipLockCheckMutant: with skip-lock-check, a read passes a lock
// older than its snapshot, and so misses a write committed below its
// start_ts that a second read of the same snapshot sees (invariant 2).
func TestSkipLockCheckMutant(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			withMutant(func() {
				during, scan, after := lockReads(t, backend)
				if during != "error: context deadline exceeded" || scan != during || after != "new" {
					t.Fatalf("without the mutant: read %q, scan %q during the commit, %q after; want waits, then new", during, scan, after)
				}
			})
			withMutant(func() {
				during, scan, after := lockReads(t, backend)
				t.Logf("skip-lock-check: one snapshot read p = %q and scanned %q, then read p = %q", during, scan, after)
				if during != "old" || scan != "ok p=old s=old" || after != "new" {
					t.Fatalf("skip-lock-check: read %q, scan %q during the commit, %q after; want old, old, then new", during, scan, after)
				}
			}, mutant.SkipLockCheck)
		})
	}
}

// latePrewrite has a writer prewrite its primary p and die; a reader
// resolves the lock (rolls it back). Then the prewrite is delivered again
// and, if it succeeds, the primary's commit is sent.
func latePrewrite(t *testing.T, backend string) (prewrite, commit error) {
	ctx := context.Background()
	e := mutantEnv(t, backend)
	w := e.client("writer")
	w.crash = func(point string) bool { return point == crashAfterPrimaryPrewrite }
	tx, _ := w.Begin(ctx)
	_ = tx.Set("p", "v", []byte("new"))
	_ = tx.Set("s", "v", []byte("new"))
	if err := tx.Commit(ctx); !errors.Is(err, errCrashed) {
		t.Fatalf("commit returned %v, want the crash", err)
	}
	e.live.Unregister("writer")
	r, _ := e.client("reader").BeginReadOnly(ctx)
	if v := getString(t, ctx, r, "p"); v != "old" {
		t.Fatalf("the reader resolving the dead lock read %q", v)
	}
	rows := groupByRow(tx.writes)
	if prewrite = w.prewrite(ctx, tx, rows[0], &tx.writes[0], nil); prewrite != nil {
		return prewrite, nil
	}
	commitTS, _ := e.oracle.Timestamp(ctx)
	_, err := w.commitPrimary(ctx, tx, rows[0], commitTS)
	return nil, err
}

// TestPushSecondaryMutant: a reader that meets a live transaction's
// secondary lock pushes its primary, and the transaction's commit point
// at a timestamp below the reader's is refused; with push-secondary the
// push lands at the secondary, the commit point never sees it, and the
// transaction commits below the reader, whose snapshot then holds half
// of it (invariant 2).
func TestPushSecondaryMutant(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			for _, on := range []bool{false, true} {
				var names []string
				if on {
					names = []string{mutant.PushSecondary}
				}
				withMutant(func() {
					ctx := context.Background()
					p := newPushEnv(t, backend)
					rd, _ := p.reader("reader", true).Begin(ctx)
					if v, err := rd.Get(ctx, "b", "v"); err != nil || string(v) != "old" {
						t.Fatalf("mutant %v: Get(b) through the lock: %q, %v", on, v, err)
					}
					commitTS, err := p.w.commitPrimary(ctx, p.tx, p.rows[0], p.early)
					if err != nil {
						t.Fatal(err)
					}
					if below := commitTS < rd.StartTS(); below != on {
						t.Fatalf("mutant %v: committed at %d, reader at %d", on, commitTS, rd.StartTS())
					}
					a, err := rd.Get(ctx, "a", "v")
					if err != nil || (string(a) == "new") != on {
						t.Fatalf("mutant %v: Get(a) in the reader's snapshot, which read b old: %q, %v", on, a, err)
					}
				}, names...)
			}
		})
	}
}

// TestSkipRollbackMutant: with skip-rollback, a late prewrite of a
// transaction that a resolver rolled back succeeds, and the transaction
// then commits (invariant 5).
func TestSkipRollbackMutant(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			withMutant(func() {
				if prewrite, _ := latePrewrite(t, backend); !errors.Is(prewrite, ErrConflict) {
					t.Fatalf("without the mutant the late prewrite returned %v, want a conflict", prewrite)
				}
			})
			withMutant(func() {
				prewrite, commit := latePrewrite(t, backend)
				if prewrite != nil || commit != nil {
					t.Fatalf("skip-rollback: the late prewrite returned %v, the commit %v; want both to succeed", prewrite, commit)
				}
				t.Logf("skip-rollback: a rolled-back transaction's late prewrite and its commit succeeded")
			}, mutant.SkipRollback)
		})
	}
}

// halfCommit has a writer commit p (primary) and s. At the first
// secondary commit it looks at the store, the writer dies, and a reader
// reads p and s, resolving what it finds. Then the commit goes on.
// primaryLocked says whether p was still locked when s was committed.
func halfCommit(t *testing.T, backend string) (primaryLocked bool, commit error, seen string) {
	ctx := context.Background()
	e := mutantEnv(t, backend)
	w := e.client("writer")
	tx, _ := w.Begin(ctx)
	_ = tx.Set("p", "v", []byte("new"))
	_ = tx.Set("s", "v", []byte("new"))
	w.crash = func(point string) bool {
		if point != crashAfterSecondaryCommit {
			return false
		}
		primaryLocked = hasCell(t, e.store, "p", FamilyLock, tx.StartTS())
		e.live.Unregister("writer")
		r, _ := e.client("reader").BeginReadOnly(ctx)
		seen = "p=" + getString(t, ctx, r, "p") + " s=" + getString(t, ctx, r, "s")
		return false
	}
	commit = tx.Commit(ctx)
	return primaryLocked, commit, seen
}

func hasCell(t *testing.T, st storage.Store, row, family string, ts uint64) bool {
	r, err := st.ReadRow(context.Background(), []byte(row), storage.Filter{{Family: family, Qualifier: "v", Time: storage.At(ts)}})
	if err != nil {
		t.Fatal(err)
	}
	return len(r.Cells) > 0
}

// TestSecondariesFirstMutant: with secondaries-first, the secondary is
// committed while the primary is still locked; a resolver that finds the
// writer dead then rolls the primary back, and the reader sees half the
// transaction (invariant 4).
func TestSecondariesFirstMutant(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			withMutant(func() {
				locked, commit, seen := halfCommit(t, backend)
				if locked || commit != nil || seen != "p=new s=new" {
					t.Fatalf("without the mutant: primary locked %v, commit %v, reader saw %s", locked, commit, seen)
				}
			})
			withMutant(func() {
				locked, commit, seen := halfCommit(t, backend)
				t.Logf("secondaries-first: primary locked %v, commit %v, reader saw %s", locked, commit, seen)
				if !locked || seen != "p=old s=new" || !errors.Is(commit, ErrConflict) {
					t.Fatalf("secondaries-first: primary locked %v, commit %v, reader saw %s; want locked, a conflict, p=old s=new", locked, commit, seen)
				}
			}, mutant.SecondariesFirst)
		})
	}
}

// TestAsyncSkipSecondaryMutant: an async transaction that wrote its
// primary's row but not yet its secondary's (blocked, then its owner
// died) is undecided, and a reader reads past it; with the mutant on, the
// reader takes it for committed and reads its value, which the
// transaction's rollback then takes back.
func TestAsyncSkipSecondaryMutant(t *testing.T) {
	for _, on := range []bool{false, true} {
		var names []string
		if on {
			names = []string{mutant.AsyncSkipSecondary}
		}
		withMutant(func() {
			e := newOnePhaseEnv(t)
			_, live := crashedAsync(t, e, crashBetweenAsyncPrewrites, true)
			r, err := NewClient(context.Background(), notOwned{e.store}, e.orc, live, Options{Owner: "reader"})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			v, err := readValue(context.Background(), r, "a", "v")
			switch {
			case !on && !errors.Is(err, ErrNotFound):
				t.Fatalf("mutant off: a/v = %q, %v; want not found (read past the undecided lock)", v, err)
			case on && v != "new":
				t.Fatalf("mutant on: a/v = %q, %v; want the undecided transaction's value read", v, err)
			}
		}, names...)
	}
}

// stable-unacked: a commit returns without raising the newest
// acknowledged timestamp, so a read-only snapshot taken above it may
// begin below a commit that already returned; the writer's own read
// right after its commit misses it.
func TestMutantStableUnacked(t *testing.T) {
	withMutant(func() {
		_, c := stableClient(t)
		if problems := checkStableRealTime(t, c, 2, 50); len(problems) > 0 {
			t.Fatalf("mutant off: %v", problems)
		}
	})
	withMutant(func() {
		_, c := stableClient(t)
		if problems := checkStableRealTime(t, c, 2, 50); len(problems) == 0 {
			t.Fatal("mutant on: no snapshot missed a commit that had returned")
		}
	}, mutant.StableUnacked)
}
