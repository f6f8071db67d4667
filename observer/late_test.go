package observer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/txn"
)

// The framework's own records were cells at version 0, set and deleted by
// plain Mutates: Bigtable's client re-sends a failed MutateRow without a
// nonce, so a copy may land after a later write of the same cell. These
// tests deliver such copies late, by hand: a late write must not undo a
// later one (DESIGN invariant 10).

// mutateLog is a store that records its Mutate calls, so a test can
// deliver one again, late. It has no optional capability.
type mutateLog struct {
	storage.Store
	mu    sync.Mutex
	calls []loggedMutate
}

type loggedMutate struct {
	row  []byte
	muts []storage.Mutation
}

func (m *mutateLog) Mutate(ctx context.Context, row []byte, muts ...storage.Mutation) error {
	m.mu.Lock()
	m.calls = append(m.calls, loggedMutate{row, muts})
	m.mu.Unlock()
	return m.Store.Mutate(ctx, row, muts...)
}

// touching returns the Mutates so far that apply a mutation of kind to
// family.
func (m *mutateLog) touching(family string, kind storage.MutationKind) []loggedMutate {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []loggedMutate
	for _, c := range m.calls {
		for _, mu := range c.muts {
			if mu.Family == family && mu.Kind == kind {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// replay delivers calls again, as late copies.
func replay(t *testing.T, st storage.Store, calls []loggedMutate) {
	t.Helper()
	if len(calls) == 0 {
		t.Fatal("no call to deliver late: the test shows nothing")
	}
	for _, c := range calls {
		if err := st.Mutate(context.Background(), c.row, c.muts...); err != nil {
			t.Fatal(err)
		}
	}
}

func newLoggedEnv(t *testing.T, opts Options) (*env, *mutateLog) {
	t.Helper()
	log := &mutateLog{Store: memory.New()}
	return newEnvOn(t, log, opts), log
}

// TestLateRegistrationAfterUnregister: the writes of a registration
// (stored, then its backfill marked done) land again after the observer
// was unregistered: it must stay unregistered.
func TestLateRegistrationAfterUnregister(t *testing.T) {
	e, log := newLoggedEnv(t, Options{})
	ctx := context.Background()
	e.set("r", "in", "x")
	if err := e.f.Register(ctx, Observer{Name: "copy", Column: "in", Fn: copyTo("out", new(atomic.Int64))}); err != nil {
		t.Fatal(err)
	}
	late := log.touching(FamilyObservers, storage.Put)
	if err := e.f.Unregister(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	replay(t, log.Store, late)
	s, err := e.f.reg.loadLocked(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := s.lookup("copy"); g != nil {
		t.Fatalf("a late copy of its registration brought back the unregistered observer: %+v", g)
	}
}

// TestLateBackfillCursorAfterUnregister: a backfill's progress record
// lands again after the observer was unregistered; registered again, its
// new backfill must still notify every cell of the column.
func TestLateBackfillCursorAfterUnregister(t *testing.T) {
	e, log := newLoggedEnv(t, Options{})
	e.f.backfillChunk = 2
	ctx := context.Background()
	var rows []string
	for i := range 6 {
		rows = append(rows, fmt.Sprint("r", i))
		e.set(rows[i], "in", "x")
	}
	obs := Observer{Name: "copy", Column: "in", Fn: copyTo("out", new(atomic.Int64))}
	if err := e.f.Register(ctx, obs); err != nil {
		t.Fatal(err)
	}
	late := log.touching(FamilyBackfill, storage.Put)
	if err := e.f.Unregister(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	clearNotifications(t, e)
	replay(t, log.Store, late[len(late)-1:])
	if err := e.f.Register(ctx, obs); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if len(e.versions(row)) == 0 {
			t.Errorf("%s: not notified by the new registration's backfill (it resumed from a late copy of the old one's progress)", row)
		}
	}
}

// TestLateRetryAfterRequarantine: a Retry's removal of a quarantine
// record lands again after the cell was quarantined anew: the new record
// must stay listed.
func TestLateRetryAfterRequarantine(t *testing.T) {
	e, log := newLoggedEnv(t, Options{MaxFailures: 1, RetryBackoff: time.Millisecond})
	ctx := context.Background()
	fail := func(context.Context, *txn.Txn, string, string) error { return errors.New("observer bug") }
	if err := e.f.Register(ctx, Observer{Name: "flaky", Column: "in", Fn: fail}); err != nil {
		t.Fatal(err)
	}
	e.set("r", "in", "x")
	e.drain(1)
	if n, err := e.f.Retry(ctx, nil); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v", n, err)
	}
	late := log.touching(FamilyQuarantine, storage.DeleteCells)
	e.drain(1) // fails again: quarantined anew
	if q, err := e.f.Quarantine(ctx); err != nil || len(q) != 1 {
		t.Fatalf("quarantine after the second failure: %+v, %v", q, err)
	}
	replay(t, log.Store, late)
	if q, err := e.f.Quarantine(ctx); err != nil || len(q) != 1 {
		t.Fatalf("quarantine after a late copy of the first Retry: %+v, %v; want the new record", q, err)
	}
}

// clearNotifications deletes every notification (test setup).
func clearNotifications(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	var rows []storage.Row
	if err := e.store.Scan(ctx, nil, nil, notifyAll, 0, func(r storage.Row) bool { rows = append(rows, r); return true }); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for _, c := range r.Cells {
			if err := e.store.Mutate(ctx, r.Key, storage.DeleteCell(c.Family, c.Qualifier, c.TS)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
