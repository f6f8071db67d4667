package storagetest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// TestLossyConforms: with its faults off, a Lossy store passes the
// conformance suite over memory and Pebble, its forwarded capabilities
// (Deferred, Conditioned, ApplyHook, Clock) included.
func TestLossyConforms(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) storage.Store{
		"memory": func(t *testing.T) storage.Store { return memory.New() },
		"pebble": func(t *testing.T) storage.Store {
			st, err := pebble.Open(t.TempDir(), pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) storage.Store {
				st, l := storagetest.NewLossy(open(t), storagetest.LossyOptions{LoseReply: 1, Duplicate: 1})
				l.SetEnabled(false)
				return st
			})
		})
	}
}

// TestLossyCapabilities: the wrapper has the capabilities of what it
// wraps that cannot be emulated, and no others.
func TestLossyCapabilities(t *testing.T) {
	caps := func(s storage.Store) [4]bool {
		_, c := s.(storage.Clock)
		_, d := s.(storage.Deferred)
		_, h := s.(storage.ApplyHooker)
		_, k := s.(storage.Conditioned)
		return [4]bool{c, d, h, k}
	}
	for _, inner := range []storage.Store{memory.New(), noClock{memory.New()}, storagetest.SharedStore{Store: memory.New()}} {
		st, _ := storagetest.NewLossy(inner, storagetest.LossyOptions{})
		if got, want := caps(st), caps(inner); got != want {
			t.Errorf("%T: capabilities (clock, deferred, hook, cond) %v, want %v", inner, got, want)
		}
		if _, ok := st.(storage.Batcher); !ok {
			t.Errorf("%T: not a Batcher", inner)
		}
	}
}

type noClock struct{ storage.Store }

// TestLossyFaults: a lost reply was applied, a failure before was not,
// and a duplicate arrives after later calls.
func TestLossyFaults(t *testing.T) {
	ctx := context.Background()
	read := func(st storage.Store) int {
		r, err := st.ReadRow(ctx, []byte("r"), storage.Filter{{Family: "f", AllQualifiers: true}})
		if err != nil {
			t.Fatal(err)
		}
		return len(r.Cells)
	}
	inner := memory.New()
	st, l := storagetest.NewLossy(inner, storagetest.LossyOptions{LoseReply: 1})
	if err := st.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", 1, nil)); !errors.Is(err, storagetest.ErrInjected) {
		t.Fatalf("lost reply: %v", err)
	}
	if read(inner) != 1 {
		t.Fatal("a lost reply's call was not applied")
	}
	st, _ = storagetest.NewLossy(inner, storagetest.LossyOptions{FailBefore: 1})
	if err := st.Mutate(ctx, []byte("r"), storage.SetCell("f", "q2", 1, nil)); !errors.Is(err, storagetest.ErrInjected) {
		t.Fatalf("failure before: %v", err)
	}
	if read(inner) != 1 {
		t.Fatal("a call that failed before was applied")
	}
	st, l = storagetest.NewLossy(inner, storagetest.LossyOptions{Duplicate: 1, FlushOdds: 1 << 30})
	b := st.(storage.Batcher)
	del := []storage.RowMutation{{Row: []byte("r"), Mutations: []storage.Mutation{{Kind: storage.DeleteCells, Family: "f", Qualifier: "q"}}}}
	if _, err := b.MutateRows(ctx, del); err != nil {
		t.Fatal(err)
	}
	l.SetEnabled(false)
	if err := st.Mutate(ctx, []byte("r"), storage.SetCell("f", "q", 5, nil)); err != nil {
		t.Fatal(err)
	}
	l.Flush()
	if read(inner) != 0 {
		t.Fatal("the late duplicate of a delete did not arrive")
	}
	if s := l.Stats(); s.Duplicated != 1 {
		t.Fatalf("stats %+v", s)
	}
}
