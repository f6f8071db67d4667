package storagetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// testConditioned: a decided cond replaces the predicate, an undecided one
// leaves it to the store, and cond runs where the apply hook is exact for
// the row. Racing writers append version n+1 of a
// column only if the hook has counted n puts to the row; a cond evaluated
// outside the row latch lets two of them write the same version.
func testConditioned(t *testing.T, s storage.Store) {
	c, ok := s.(storage.Conditioned)
	h, ok2 := s.(storage.ApplyHooker)
	if !ok || !ok2 {
		t.Skip("store is not Conditioned with an ApplyHook")
	}
	var mu sync.Mutex
	puts := map[string]uint64{} // row -> puts applied, kept by the hook
	installHook(t, h, func(row []byte, ms []storage.Mutation) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			if m.Kind == storage.Put {
				puts[string(row)]++
			}
		}
	})
	count := func(row string) uint64 {
		mu.Lock()
		defer mu.Unlock()
		return puts[row]
	}
	yes := func() (bool, bool) { return true, true }
	no := func() (bool, bool) { return false, true }
	undecided := func() (bool, bool) { return true, false }
	pred := storage.Filter{{Family: "f", Qualifier: "q"}}
	tr := []storage.Mutation{set("f", "t", 1, "true")}
	fa := []storage.Mutation{set("f", "q", 1, "false")}
	for i, tc := range []struct {
		cond     storage.Cond
		deferred bool
		want     bool
	}{
		{undecided, false, false}, // the predicate decides: no cell yet (writes f:q)
		{nil, true, true},         // the predicate decides: f:q is there
		{no, false, false},        // decided false although f:q is there
		{yes, true, true},
	} {
		matched, err := c.CheckAndMutateCond(ctx, []byte("r"), tc.cond, pred, tr, fa, tc.deferred)
		if err != nil || matched != tc.want {
			t.Fatalf("call %d: CheckAndMutateCond = %v, %v; want %v", i, matched, err, tc.want)
		}
	}
	// decided true on an empty row: the predicate is not read.
	if matched, err := c.CheckAndMutateCond(ctx, []byte("empty"), yes, pred, tr, fa, false); err != nil || !matched {
		t.Fatalf("decided true on an empty row = %v, %v", matched, err)
	}
	called := false
	spy := func() (bool, bool) { called = true; return true, true }
	if _, err := c.CheckAndMutateCond(ctx, nil, spy, pred, tr, fa, false); !errors.Is(err, storage.ErrInvalidArgument) || called {
		t.Fatalf("empty row: err %v, cond called %v; want ErrInvalidArgument before cond", err, called)
	}

	const workers, ops = 16, 40
	var wg sync.WaitGroup
	var wins sync.Map // row -> *int
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := fmt.Sprintf("race%d", w%2)
			won := 0
			for range ops {
				n := count(row)
				cas := []storage.Mutation{set("f", "v", n+1, fmt.Sprint(w))}
				matched, err := c.CheckAndMutateCond(ctx, []byte(row), func() (bool, bool) { return count(row) != n, true }, nil, nil, cas, w%3 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				if !matched {
					won++
				}
			}
			v, _ := wins.LoadOrStore(row, new(int))
			mu.Lock()
			*v.(*int) += won
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, row := range []string{"race0", "race1"} {
		r, err := s.ReadRow(ctx, []byte(row), storage.Filter{{Family: "f", Qualifier: "v"}})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := wins.Load(row)
		if won := *v.(*int); len(r.Cells) != won || count(row) != uint64(won) {
			t.Errorf("row %s: %d writers won, %d puts hooked, %d versions stored: a cond ran outside the row latch",
				row, won, count(row), len(r.Cells))
		}
	}
}
