package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

type hookCall struct {
	row string
	ms  []storage.Mutation
}

// hookRecorder installs an apply hook that records every call and replays
// it into a model, so the model is the index an owner would keep.
type hookRecorder struct {
	mu    sync.Mutex
	calls []hookCall
	model *model
}

func recordHook(t *testing.T, s storage.Store) *hookRecorder {
	h, ok := s.(storage.ApplyHooker)
	if !ok {
		t.Skip("not an ApplyHooker")
	}
	r := &hookRecorder{model: newModel()}
	installHook(t, h, func(row []byte, ms []storage.Mutation) {
		c := hookCall{row: string(row), ms: slices.Clone(ms)}
		for i := range c.ms {
			c.ms[i].Value = slices.Clone(c.ms[i].Value)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, c)
		r.model.apply(row, c.ms)
	})
	return r
}

// installHook installs hook for the rest of the test.
func installHook(t *testing.T, h storage.ApplyHooker, hook storage.ApplyHook) {
	t.Helper()
	remove, err := h.SetApplyHook(hook)
	if err != nil {
		t.Fatalf("SetApplyHook: %v", err)
	}
	t.Cleanup(remove)
}

// testApplyHookOwner: one hook at a time. A second SetApplyHook fails with
// ErrInUse and changes nothing; once the first is removed another can be
// installed; a stale remove (called twice) does not remove the newer hook;
// a nil hook is bad input.
func testApplyHookOwner(t *testing.T, s storage.Store) {
	h, ok := s.(storage.ApplyHooker)
	if !ok {
		t.Skip("not an ApplyHooker")
	}
	var first, second atomic.Int64
	count := func(n *atomic.Int64) storage.ApplyHook {
		return func([]byte, []storage.Mutation) { n.Add(1) }
	}
	removeFirst, err := h.SetApplyHook(count(&first))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.SetApplyHook(count(&second)); !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("second SetApplyHook: %v, want ErrInUse", err)
	}
	if _, err := h.SetApplyHook(nil); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("SetApplyHook(nil): %v, want ErrInvalidArgument", err)
	}
	put(t, s, "r", set("a", "q", 1, "x"))
	removeFirst()
	removeSecond, err := h.SetApplyHook(count(&second))
	if err != nil {
		t.Fatalf("SetApplyHook after remove: %v", err)
	}
	defer removeSecond()
	removeFirst() // stale: must not remove the second hook
	put(t, s, "r", set("a", "q", 2, "y"))
	if f, s := first.Load(), second.Load(); f != 1 || s != 1 {
		t.Fatalf("hook calls: first %d, second %d; want 1 and 1", f, s)
	}
}

// take returns and forgets the calls recorded so far.
func (r *hookRecorder) take() []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func mutationsEqual(a, b []storage.Mutation) bool {
	return slices.EqualFunc(a, b, func(x, y storage.Mutation) bool {
		return x.Kind == y.Kind && x.Family == y.Family && x.Qualifier == y.Qualifier &&
			x.TS == y.TS && bytes.Equal(x.Value, y.Value) && x.Time == y.Time
	})
}

func (r *hookRecorder) expect(t *testing.T, what string, want ...hookCall) {
	t.Helper()
	got := r.take()
	if len(got) == len(want) && slices.EqualFunc(got, want, func(x, y hookCall) bool {
		return x.row == y.row && mutationsEqual(x.ms, y.ms)
	}) {
		return
	}
	t.Fatalf("%s: hook calls\n got  %+v\n want %+v", what, got, want)
}

// expectModel checks that replaying the hook calls rebuilt the store.
func (r *hookRecorder) expectModel(t *testing.T, s storage.Store) {
	t.Helper()
	r.mu.Lock()
	want := r.model.scan(nil, nil, everything(), 0)
	r.mu.Unlock()
	expectRows(t, "store vs the index rebuilt from hook calls", dump(t, s), want)
}

func testApplyHook(t *testing.T, s storage.Store) {
	r := recordHook(t, s)
	ms := []storage.Mutation{set("a", "q", 1, "v"), storage.DeleteCell("a", "q", 0), {Kind: storage.DeleteRow}, set("lock", "", 2, "L")}
	put(t, s, "r", ms...)
	r.expect(t, "Mutate", hookCall{"r", ms})
	put(t, s, "r")
	r.expect(t, "Mutate without mutations")

	ifTrue := []storage.Mutation{set("data", "t", 3, "T")}
	ifFalse := []storage.Mutation{set("data", "f", 3, "F")}
	checkAndMutate(t, s, "r", storage.Filter{fam("lock")}, ifTrue, ifFalse)
	r.expect(t, "CheckAndMutate, matched", hookCall{"r", ifTrue})
	checkAndMutate(t, s, "r", storage.Filter{fam("notify")}, ifTrue, ifFalse)
	r.expect(t, "CheckAndMutate, not matched", hookCall{"r", ifFalse})
	checkAndMutate(t, s, "r", storage.Filter{fam("lock")}, nil, ifFalse)
	checkAndMutate(t, s, "r", storage.Filter{fam("notify")}, ifTrue, nil)
	r.expect(t, "CheckAndMutate, empty branch")

	increment(t, s, "r", "a", "n", 3)
	if calls := r.take(); len(calls) != 1 || calls[0].row != "r" {
		t.Fatalf("Increment: hook calls %+v, want one on row r", calls)
	}
	if b, ok := s.(storage.Batcher); ok {
		rows := []storage.RowMutation{
			{Row: []byte("x"), Mutations: []storage.Mutation{set("a", "q", 1, "x")}},
			{Row: []byte("y")},
			{Row: []byte("r"), Mutations: []storage.Mutation{storage.DeleteCell("data", "t", 3)}},
			{Row: []byte("x"), Mutations: []storage.Mutation{set("a", "q", 1, "x'")}},
		}
		if _, err := b.MutateRows(ctx, rows); err != nil {
			t.Fatalf("MutateRows: %v", err)
		}
		r.expect(t, "MutateRows", hookCall{"x", rows[0].Mutations}, hookCall{"r", rows[2].Mutations}, hookCall{"x", rows[3].Mutations})
	}
	r.expectModel(t, s)
}

// testApplyHookConcurrent races writers on a few rows: the hook calls of a
// row must come in the order the writes were applied, or the rebuilt index
// diverges from the store.
func testApplyHookConcurrent(t *testing.T, s storage.Store) {
	r := recordHook(t, s)
	b, _ := s.(storage.Batcher)
	const workers, ops = 8, 150
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range ops {
				if err := hookOp(s, b, rng, fmt.Sprintf("w%d-%d", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r.expectModel(t, s)
}

// hookOp does one random write to one of four shared rows.
func hookOp(s storage.Store, b storage.Batcher, rng *rand.Rand, value string) error {
	row := []byte{"wxyz"[rng.IntN(4)]}
	m := set("a", "q", rng.Uint64N(3), value)
	switch rng.IntN(5) {
	case 0:
		return s.Mutate(ctx, row, m, storage.DeleteCell("a", "q", rng.Uint64N(3)))
	case 1:
		_, err := s.CheckAndMutate(ctx, row, storage.Filter{col("a", "q", storage.At(rng.Uint64N(3)))},
			[]storage.Mutation{m}, []storage.Mutation{{Kind: storage.DeleteRow}, m})
		return err
	case 2:
		_, err := s.Increment(ctx, row, "b", "n", 1)
		return err
	case 3:
		if b != nil {
			other := []byte{"wxyz"[rng.IntN(4)]}
			_, err := b.MutateRows(ctx, []storage.RowMutation{{Row: row, Mutations: []storage.Mutation{m}}, {Row: other, Mutations: []storage.Mutation{m}}})
			return err
		}
	}
	return s.Mutate(ctx, row, m)
}
