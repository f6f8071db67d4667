package pebble

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// hangBound is how long a call given a 200ms deadline may take before the
// test calls it hung: far above any scheduling delay, far below the held
// sync, which lasts until the test releases it.
const hangBound = 10 * time.Second

// TestWaitsHonourContext: while a durable write of row r waits for a held
// log sync, every call that must wait for that write — a read settling r,
// a durable write of r (which enters pebble only once the row's earlier
// durable writes are synced) — returns its context's error once its
// deadline passes, not when the sync is released, and changes nothing. A
// deferred write of r waits for no sync: it applies at once. The waiters
// that gave up leave the latches as they found them: the held write
// completes when its sync is released, and later calls on r and on the
// rows latched beside it go through.
func TestWaitsHonourContext(t *testing.T) {
	s, _, ffs, done := heldWrite(t)
	defer s.Close()
	released := false
	defer func() {
		if !released {
			ffs.Release(nil)
		}
	}()
	r, other := []byte("r"), []byte("other")
	f := storage.Filter{{Family: "f", Qualifier: "q"}}
	rows := func(row []byte, ms ...storage.Mutation) storage.RowMutation {
		return storage.RowMutation{Row: row, Mutations: ms}
	}
	calls := map[string]func(ctx context.Context) error{
		"ReadRow": func(ctx context.Context) error {
			_, err := s.ReadRow(ctx, r, f)
			return err
		},
		"ReadRow(point)": func(ctx context.Context) error {
			_, err := s.ReadRow(ctx, r, storage.Filter{{Family: "f", Qualifier: "q", Time: storage.At(1)}})
			return err
		},
		"Scan": func(ctx context.Context) error {
			return s.Scan(ctx, nil, nil, f, 0, func(storage.Row) bool { return true })
		},
		"Mutate": func(ctx context.Context) error {
			return s.Mutate(ctx, r, storage.SetCell("f", "q", 2, []byte("late")))
		},
		"CheckAndMutate": func(ctx context.Context) error {
			_, err := s.CheckAndMutate(ctx, r, f, nil, []storage.Mutation{storage.SetCell("f", "q", 3, []byte("late"))})
			return err
		},
		"CheckAndMutateDeferred": func(ctx context.Context) error {
			_, err := s.CheckAndMutateDeferred(ctx, r, f, nil, []storage.Mutation{storage.SetCell("f", "q", 4, []byte("late"))})
			return err
		},
		"Increment": func(ctx context.Context) error {
			_, err := s.Increment(ctx, r, "f", "n", 1)
			return err
		},
		"MutateRows": func(ctx context.Context) error {
			_, err := s.MutateRows(ctx, []storage.RowMutation{
				rows(other, storage.SetCell("f", "q", 1, []byte("late"))),
				rows(r, storage.SetCell("f", "q", 5, []byte("late"))),
			})
			return err
		},
		"MutateRecorded": func(ctx context.Context) error {
			return s.MutateRecorded(ctx, r, []storage.Mutation{storage.SetCell("f", "q", 6, []byte("late"))}, []Record{{Key: []byte("late"), Value: []byte("x")}})
		},
	}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(calls))
	for name, call := range calls {
		go func() {
			cctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			results <- result{name, call(cctx)}
		}()
	}
	bound := time.After(hangBound)
	pending := map[string]bool{}
	for name := range calls {
		pending[name] = true
	}
	for len(pending) > 0 {
		select {
		case res := <-results:
			delete(pending, res.name)
			if res.name == "CheckAndMutateDeferred" {
				if res.err != nil {
					t.Errorf("%s while the row's durable write is in flight: %v, want it decided at once (its predicate finds v2)", res.name, res.err)
				}
				continue
			}
			if !errors.Is(res.err, context.DeadlineExceeded) {
				t.Errorf("%s while the row's durable write is in flight: %v, want its deadline's error", res.name, res.err)
			}
		case <-bound:
			t.Fatalf("calls with a 200ms deadline still run after %v while a durable write of their row waits for its sync: %v", hangBound, slices.Sorted(maps.Keys(pending)))
		}
	}

	released = true
	ffs.Release(nil)
	if err := <-done; err != nil {
		t.Fatalf("the held write, once its sync was released: %v", err)
	}
	// Nothing the abandoned calls would have written is there (the
	// deferred write's predicate found v2: it wrote nothing).
	got, err := s.ReadRow(ctx, r, storage.Filter{{Family: "f", AllQualifiers: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cells) != 1 || string(got.Cells[0].Value) != "v2" || got.Cells[0].TS != 1 {
		t.Fatalf("row r after the abandoned calls: %v, want only the held write's v2 at 1", got.Cells)
	}
	if got, err := s.ReadRow(ctx, other, f); err != nil || len(got.Cells) != 0 {
		t.Fatalf("row other after an abandoned MutateRows: %v, %v; want nothing", got.Cells, err)
	}
	var recs int
	if err := s.ScanRecords(ctx, []byte("late"), func(_, _ []byte) bool { recs++; return true }); err != nil || recs != 0 {
		t.Fatalf("records of an abandoned MutateRecorded: %d, %v; want none", recs, err)
	}
	// The latches are free: writes of both rows go through.
	wctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	if _, err := s.MutateRows(wctx, []storage.RowMutation{
		rows(other, storage.SetCell("f", "q", 1, []byte("after"))),
		rows(r, storage.SetCell("f", "q", 7, []byte("after"))),
	}); err != nil {
		t.Fatalf("a write of the rows after the waiters gave up: %v", err)
	}
	if v := readValue(t, s); v != "after" {
		t.Fatalf("row r: %q, want the write made after the waiters gave up", v)
	}
}

// TestWritesPassAHeldSync: a durable write of row r waits for a held log
// sync with its latch released. A deferred write of r goes through at
// once, and a read of another column of r returns at once (what it reads
// is not the held write's; the deferred write is read before it is
// durable, as a deferred write may be), while a read of the held write's
// column waits for its sync. A power cut now loses both writes (the log
// is synced in order); once the sync is released both are there.
func TestWritesPassAHeldSync(t *testing.T) {
	s, mem, ffs, done := heldWrite(t)
	defer s.Close()
	released := false
	defer func() {
		if !released {
			ffs.Release(nil)
		}
	}()
	r := []byte("r")
	d := storage.Filter{{Family: "f", Qualifier: "d"}}
	dctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	if _, err := s.MutateRowsDeferred(dctx, []storage.RowMutation{{Row: r, Mutations: []storage.Mutation{storage.SetCell("f", "d", 9, []byte("deferred"))}}}); err != nil {
		t.Fatalf("a deferred write of the row while its durable write waits for its sync: %v", err)
	}
	if got, err := s.ReadRow(dctx, r, d); err != nil || len(got.Cells) != 1 || string(got.Cells[0].Value) != "deferred" {
		t.Fatalf("a read of another column of the row while its durable write waits for its sync: %v, %v; want the deferred write at once", got.Cells, err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer rcancel()
	if got, err := s.ReadRow(rctx, r, storage.Filter{{Family: "f", Qualifier: "q"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read of the held write's column: %v, %v; want its deadline's error", got.Cells, err)
	}
	after := reopenClone(t, mem, vfs.CrashCloneCfg{})
	if got, err := after.ReadRow(ctx, r, d); err != nil || len(got.Cells) != 0 {
		t.Fatalf("after a power cut with the sync held: %v, %v; want the deferred write lost with the held one", got.Cells, err)
	}
	released = true
	ffs.Release(nil)
	if err := <-done; err != nil {
		t.Fatalf("the held write, once its sync was released: %v", err)
	}
	got, err := s.ReadRow(dctx, r, d)
	if err != nil || len(got.Cells) != 1 || string(got.Cells[0].Value) != "deferred" {
		t.Fatalf("the deferred write after the sync returned: %v, %v", got.Cells, err)
	}
}

// TestInflightSyncDone: a sync's waiters, whether they asked for its
// channel before it finished (made then) or after (a closed one), all
// go on once it finished, and none before.
func TestInflightSyncDone(t *testing.T) {
	p := &inflightSync{}
	var early []<-chan struct{}
	for range 3 {
		early = append(early, p.doneCh())
	}
	for i, ch := range early {
		select {
		case <-ch:
			t.Fatalf("waiter %d went on before the sync finished", i)
		default:
		}
	}
	woke := make(chan struct{})
	go func() {
		<-p.doneCh()
		close(woke)
	}()
	p.finish()
	<-woke
	for i, ch := range append(early, p.doneCh()) {
		select {
		case <-ch:
		default:
			t.Fatalf("waiter %d still blocked after the sync finished", i)
		}
	}
}
