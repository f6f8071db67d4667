package storagetest

import (
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// testClock: a store with a Clock tells a time near this machine's (the
// tests run the store's server here), not going back by more than its
// resolution between calls; reading it leaves no cell any model filter
// selects.
func testClock(t *testing.T, s storage.Store) {
	c, ok := s.(storage.Clock)
	if !ok {
		t.Skip("no Clock")
	}
	var last time.Time
	for i := range 5 {
		before := time.Now()
		now, err := c.Now(ctx)
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if now.Before(before.Add(-2*time.Second)) || now.After(after.Add(2*time.Second)) {
			t.Fatalf("call %d: the store's clock says %v, this machine's %v..%v", i, now, before, after)
		}
		if now.Before(last.Add(-2 * time.Millisecond)) {
			t.Fatalf("call %d: the store's clock went back from %v to %v", i, last, now)
		}
		last = now
	}
	f := storage.Filter{}
	for _, fam := range []string{"a", "cf", "data", "lock", "write", "notify"} {
		f = append(f, storage.Selector{Family: fam, AllQualifiers: true})
	}
	err := s.Scan(ctx, nil, nil, f, 0, func(r storage.Row) bool {
		t.Errorf("reading the clock left row %q: %v", r.Key, r.Cells)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}
