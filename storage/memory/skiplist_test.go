package memory

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSkiplistModel checks the skiplist against a sorted slice under random
// inserts, removals and seeks.
func TestSkiplistModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	l := newSkiplist(seed)
	var model []string
	key := func() string { return string([]byte{byte('a' + r.IntN(20)), byte(r.IntN(3))}) }
	for range 5000 {
		k := key()
		i, found := slices.BinarySearch(model, k)
		switch r.IntN(3) {
		case 0:
			if !found {
				l.insert(k, &famRow{})
				model = slices.Insert(model, i, k)
			}
		case 1:
			l.remove(k)
			if found {
				model = slices.Delete(model, i, i+1)
			}
		}
		n := l.seekGE(k)
		if i == len(model) {
			if n != nil {
				t.Fatalf("seekGE(%q) = %q, want nil", k, n.key)
			}
			continue
		}
		if n == nil || n.key != model[i] {
			t.Fatalf("seekGE(%q) = %v, want %q", k, n, model[i])
		}
	}
	var got []string
	for n := l.head.next[0]; n != nil; n = n.next[0] {
		got = append(got, n.key)
	}
	if !slices.Equal(got, model) {
		t.Fatalf("contents %q, want %q", got, model)
	}
}
