package storage

import "testing"

func TestFilterTouches(t *testing.T) {
	f := Filter{
		{Family: "lock", Qualifier: "c", Time: Before(10)},
		{Family: "write", Qualifier: "c", Time: Before(10), Limit: 1},
	}
	for _, tc := range []struct {
		m    Mutation
		want bool
	}{
		{SetCell("write", "c", 9, nil), true},
		{SetCell("write", "c", 10, nil), false}, // above the snapshot
		{SetCell("write", "d", 5, nil), false},  // another column
		{SetCell("data", "c", 5, nil), false},   // another family
		{DeleteCell("lock", "c", 5), true},
		{DeleteCell("lock", "c", 10), false},
		{Mutation{Kind: DeleteCells, Family: "lock", Qualifier: "c", Time: From(9)}, true},
		{Mutation{Kind: DeleteCells, Family: "lock", Qualifier: "c", Time: From(10)}, false},
		{Mutation{Kind: DeleteCells, Family: "lock", Qualifier: "c"}, true},
		{Mutation{Kind: DeleteRow}, true},
	} {
		if got := f.Touches(&tc.m); got != tc.want {
			t.Errorf("Touches(%+v) = %v, want %v", tc.m, got, tc.want)
		}
	}
	if (Filter{}).Touches(&Mutation{Kind: DeleteRow}) {
		t.Error("an empty filter is touched by a row delete")
	}
	all := Filter{{Family: "f", AllQualifiers: true, Time: From(3)}}
	if !all.Touches(&Mutation{Kind: DeleteCells, Family: "f", Qualifier: "x", Time: TimeRange{Start: 1, End: 4}}) {
		t.Error("a delete of [1,4) misses a selector from 3")
	}
}
