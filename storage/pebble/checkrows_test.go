package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// TestCheckAndMutateRows: each row's predicate picks its own branch; the
// branches land together, and the apply hook sees each row's; a row named
// twice, or a guard that refuses, applies nothing.
func TestCheckAndMutateRows(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	var hooked []string
	if _, err := s.SetApplyHook(func(row []byte, _ []storage.Mutation) { hooked = append(hooked, string(row)) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Mutate(ctx, []byte("b"), storage.SetCell("lock", "c", 1, nil)); err != nil {
		t.Fatal(err)
	}
	hooked = nil
	lock := storage.Filter{{Family: "lock", Qualifier: "c"}}
	mark := func(v string) []storage.Mutation { return []storage.Mutation{storage.SetCell("d", "c", 1, []byte(v))} }
	for _, deferred := range []bool{false, true} {
		matched, err := s.CheckAndMutateRows(ctx, []storage.RowCheck{
			{Row: []byte("a"), Predicate: lock, IfTrue: mark("t"), IfFalse: mark("f")},
			{Row: []byte("b"), Predicate: lock, IfTrue: mark("t"), IfFalse: mark("f")},
		}, deferred)
		if err != nil || matched[0] || !matched[1] {
			t.Fatalf("deferred %v: matched %v, %v; want [false true]", deferred, matched, err)
		}
	}
	for row, want := range map[string]string{"a": "f", "b": "t"} {
		r, err := s.ReadRow(ctx, []byte(row), storage.Filter{{Family: "d", Qualifier: "c"}})
		if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != want {
			t.Fatalf("%s: %v, %v; want %q", row, r.Cells, err, want)
		}
	}
	if len(hooked) != 4 {
		t.Fatalf("hook saw %q; want each row once per call", hooked)
	}

	before := s.SyncedWrites()
	twice := []storage.RowCheck{{Row: []byte("x"), IfFalse: mark("1")}, {Row: []byte("x"), IfFalse: mark("2")}}
	if _, err := s.CheckAndMutateRows(ctx, twice, false); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("a row twice: %v; want ErrInvalidArgument", err)
	}
	refuse := errors.New("refused")
	then := []storage.RowMutation{{Row: []byte("y"), Mutations: mark("then")}}
	if _, err := s.CheckAndMutateThen(ctx, storage.RowCheck{Row: []byte("b"), Predicate: lock, IfTrue: mark("t2")}, then, func() error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("a refusing guard: %v", err)
	}
	for _, row := range []string{"x", "y"} {
		if r, err := s.ReadRow(ctx, []byte(row), storage.Filter{{Family: "d", Qualifier: "c"}}); err != nil || len(r.Cells) != 0 {
			t.Fatalf("%s after refused calls: %v, %v", row, r.Cells, err)
		}
	}
	if ok, err := s.CheckAndMutateThen(ctx, storage.RowCheck{Row: []byte("b"), Predicate: lock, IfTrue: mark("t2")}, then, func() error { return nil }); err != nil || !ok {
		t.Fatalf("then after a match: %v, %v", ok, err)
	}
	if r, err := s.ReadRow(ctx, []byte("y"), storage.Filter{{Family: "d", Qualifier: "c"}}); err != nil || len(r.Cells) != 1 {
		t.Fatalf("y after a matched check: %v, %v; want then applied", r.Cells, err)
	}
	if got := s.SyncedWrites() - before; got != 1 {
		t.Fatalf("synced writes: %d; want 1 (the refused calls sync nothing)", got)
	}
}

// TestCheckAndMutateRowsUnless: a check's Unless turns a matched predicate
// into the false branch where it selects a cell, in a batch and in
// CheckAndMutateThen, whose then then applies nothing.
func TestCheckAndMutateRowsUnless(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	for _, row := range []string{"a", "b"} {
		if err := s.Mutate(ctx, []byte(row), storage.SetCell("lock", "c", 1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Mutate(ctx, []byte("b"), storage.SetCell("push", "c", 7, nil)); err != nil {
		t.Fatal(err)
	}
	lock := storage.Filter{{Family: "lock", Qualifier: "c"}}
	push := storage.Filter{{Family: "push", Qualifier: "c", Time: storage.From(5)}}
	mark := func(v string) []storage.Mutation { return []storage.Mutation{storage.SetCell("d", "c", 1, []byte(v))} }
	matched, err := s.CheckAndMutateRows(ctx, []storage.RowCheck{
		{Row: []byte("a"), Predicate: lock, Unless: push, IfTrue: mark("t"), IfFalse: mark("f")},
		{Row: []byte("b"), Predicate: lock, Unless: push, IfTrue: mark("t"), IfFalse: mark("f")},
	}, false)
	if err != nil || !matched[0] || matched[1] {
		t.Fatalf("matched %v, %v; want [true false]", matched, err)
	}
	then := []storage.RowMutation{{Row: []byte("z"), Mutations: mark("then")}}
	ok, err := s.CheckAndMutateThen(ctx, storage.RowCheck{Row: []byte("b"), Predicate: lock, Unless: push, IfTrue: mark("t2")}, then, nil)
	if err != nil || ok {
		t.Fatalf("CheckAndMutateThen: %v, %v; want false", ok, err)
	}
	r, err := s.ReadRow(ctx, []byte("z"), storage.Filter{{Family: "d", Qualifier: "c"}})
	if err != nil || len(r.Cells) != 0 {
		t.Fatalf("then applied although unless selected a cell: %v, %v", r.Cells, err)
	}
}

// TestCheckAndMutateRowsRandomized: a batch of checks reads its
// predicates a family at a time through one iterator; each check's
// branch is what reading its predicate and its unless on their own, just
// before the batch, decides. Random cells in four families over rows
// some of whose versions are flushed to tables and some in the memtable,
// random predicates and unlesses (exact cells, time ranges, every
// qualifier of a family), batches of up to 12 rows.
func TestCheckAndMutateRowsRandomized(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	t.Logf("seed %d", rng.Uint64())
	families := []string{"data", "gcfence", "lock", "write"}
	quals := []string{"a", "b", "c"}
	rowName := func(i int) []byte { return []byte(fmt.Sprintf("r%02d", i)) }
	selector := func() storage.Selector {
		sel := storage.Selector{Family: families[rng.IntN(len(families))], Qualifier: quals[rng.IntN(len(quals))]}
		switch rng.IntN(4) {
		case 0:
			sel.Time = storage.At(uint64(1 + rng.IntN(20)))
		case 1:
			sel.Time = storage.From(uint64(1 + rng.IntN(20)))
		case 2:
			sel.Time = storage.Before(uint64(1 + rng.IntN(20)))
		default:
			sel.Qualifier, sel.AllQualifiers = "", true
		}
		return sel
	}
	filter := func() storage.Filter {
		var f storage.Filter
		for range rng.IntN(4) {
			f = append(f, selector())
		}
		return f
	}
	for round := range 60 {
		var rows []storage.RowMutation
		for range 20 {
			var ms []storage.Mutation
			for range 1 + rng.IntN(3) {
				ms = append(ms, storage.SetCell(families[rng.IntN(len(families))], quals[rng.IntN(len(quals))], uint64(1+rng.IntN(20)), []byte{byte(round)}))
			}
			rows = append(rows, storage.RowMutation{Row: rowName(rng.IntN(40)), Mutations: ms})
		}
		if _, err := s.MutateRows(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if round%7 == 0 {
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		picked := rng.Perm(40)[:1+rng.IntN(12)]
		checks := make([]storage.RowCheck, len(picked))
		want := make([]bool, len(picked))
		for i, r := range picked {
			checks[i] = storage.RowCheck{Row: rowName(r), Predicate: filter()}
			if rng.IntN(2) == 0 {
				checks[i].Unless = filter()
			}
			if len(checks[i].Predicate) > 0 {
				got, err := s.ReadRow(ctx, checks[i].Row, checks[i].Predicate)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = len(got.Cells) > 0
			}
			if want[i] && len(checks[i].Unless) > 0 {
				got, err := s.ReadRow(ctx, checks[i].Row, checks[i].Unless)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = len(got.Cells) == 0
			}
		}
		matched, err := s.CheckAndMutateRows(ctx, checks, rng.IntN(2) == 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range checks {
			if matched[i] != want[i] {
				t.Fatalf("round %d, check %d of %d (row %s, predicate %v, unless %v): matched %v; reading them on their own decides %v",
					round, i, len(checks), checks[i].Row, checks[i].Predicate, checks[i].Unless, matched[i], want[i])
			}
		}
	}
}
