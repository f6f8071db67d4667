package storagetest

import (
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// testUnless: an Unlessed write applies ifTrue only where the predicate
// selects a cell and unless selects none, and ifFalse in the other three
// cases; an empty unless is CheckAndMutate. A CondUnlessed store reads
// unless even when cond decides the predicate.
func testUnless(t *testing.T, s storage.Store) {
	u, ok := s.(storage.Unlessed)
	if !ok {
		t.Skip("store is not Unlessed")
	}
	pred := storage.Filter{{Family: "f", Qualifier: "lock", Time: storage.At(5)}}
	unless := storage.Filter{{Family: "f", Qualifier: "push", Time: storage.From(10)}}
	tr := []storage.Mutation{set("f", "t", 1, "true")}
	fa := []storage.Mutation{set("f", "t", 1, "false")}
	for i, tc := range []struct {
		row    string
		setup  []storage.Mutation
		unless storage.Filter
		want   bool
	}{
		{"none", nil, unless, false},
		{"pred", []storage.Mutation{set("f", "lock", 5, "l")}, unless, true},
		{"pred-old-push", []storage.Mutation{set("f", "lock", 5, "l"), set("f", "push", 9, "")}, unless, true},
		{"pred-push", []storage.Mutation{set("f", "lock", 5, "l"), set("f", "push", 10, "")}, unless, false},
		{"pred-newer-push", []storage.Mutation{set("f", "lock", 5, "l"), set("f", "push", 9, ""), set("f", "push", 30, "")}, unless, false},
		{"push-only", []storage.Mutation{set("f", "push", 10, "")}, unless, false},
		{"pred-empty-unless", []storage.Mutation{set("f", "lock", 5, "l"), set("f", "push", 10, "")}, nil, true},
	} {
		if len(tc.setup) > 0 {
			put(t, s, tc.row, tc.setup...)
		}
		matched, err := u.CheckAndMutateUnless(ctx, []byte(tc.row), pred, tc.unless, tr, fa)
		if err != nil {
			t.Fatalf("case %d (%s): %v", i, tc.row, err)
		}
		if matched != tc.want {
			t.Errorf("case %d (%s): matched = %v, want %v", i, tc.row, matched, tc.want)
		}
		want := "false"
		if tc.want {
			want = "true"
		}
		r, err := s.ReadRow(ctx, []byte(tc.row), storage.Filter{{Family: "f", Qualifier: "t"}})
		if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != want {
			t.Errorf("case %d (%s): branch written %v (%v), want %q", i, tc.row, r.Cells, err, want)
		}
	}
	if _, err := u.CheckAndMutateUnless(ctx, []byte("bad"), pred, storage.Filter{{Family: "", Qualifier: "q"}}, tr, fa); err == nil {
		t.Errorf("an unless with an empty family: no error")
	}
	cu, ok := s.(storage.CondUnlessed)
	if !ok {
		return
	}
	yes := func() (bool, bool) { return true, true }
	put(t, s, "cond", set("f", "push", 10, ""))
	matched, err := cu.CheckAndMutateCondUnless(ctx, []byte("cond"), yes, pred, unless, tr, fa, false)
	if err != nil || matched {
		t.Errorf("CondUnless, cond decided true, unless selects a cell: matched %v, %v; want false", matched, err)
	}
	matched, err = cu.CheckAndMutateCondUnless(ctx, []byte("cond2"), yes, pred, unless, tr, fa, true)
	if err != nil || !matched {
		t.Errorf("CondUnless, cond decided true, unless selects none: matched %v, %v; want true", matched, err)
	}
}
