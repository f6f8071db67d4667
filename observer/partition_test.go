package observer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
)

// testRand returns a generator from a logged seed.
func testRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 7))
}

// checkTiling fails unless ranges (each [start, end), nil open) are
// disjoint and cover the keyspace: sorted by start, the first starts at
// the keyspace's start, each ends where the next starts, the last ends at
// its end.
func checkTiling(t *testing.T, ranges [][2][]byte) {
	t.Helper()
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b [2][]byte) int {
		if c := bytes.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return compareEnd(a[1], b[1])
	})
	if rs[0][0] != nil || rs[len(rs)-1][1] != nil {
		t.Fatalf("ranges %q do not reach both ends of the keyspace", rs)
	}
	for i, r := range rs {
		if r[1] != nil && bytes.Compare(r[0], r[1]) > 0 {
			t.Fatalf("ranges %q: range %d is inverted", rs, i)
		}
		if i > 0 && !bytes.Equal(rs[i-1][1], r[0]) {
			t.Fatalf("ranges %q: a gap or an overlap between %d and %d", rs, i-1, i)
		}
	}
}

// compareEnd orders range ends, nil (the keyspace's end) last.
func compareEnd(a, b []byte) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	return bytes.Compare(a, b)
}

// TestSplitPoints: the bounds of a sample cut it into n ranges of about
// equal counts that tile the keyspace; an empty sample splits the 8-byte
// key space evenly; a sample of fewer keys than ranges leaves some empty.
func TestSplitPoints(t *testing.T) {
	rng := testRand(t)
	var s keySampler
	for i := range 500 {
		s.add(fmt.Appendf(nil, "row%05d", rng.IntN(100000)+i*100000))
	}
	sample := s.sorted()
	for _, n := range []int{1, 2, 3, 7} {
		p := &Partition{Members: make([]coord.Member, n), Splits: splitPoints(sample, n), sample: sample}
		var ranges [][2][]byte
		for i := range n {
			start, end := p.Range(i)
			ranges = append(ranges, [2][]byte{start, end})
			in := 0
			for _, k := range sample {
				if inRange(k, start, end) {
					in++
				}
			}
			if want := len(sample) / n; in < want-1 || in > want+1 {
				t.Fatalf("n=%d: range %d holds %d of %d sampled keys", n, i, in, len(sample))
			}
			for range 20 {
				if o := p.origin(rng, i); !inRange(o, start, end) && !bytes.Equal(o, start) {
					t.Fatalf("origin %q outside range %d [%q, %q)", o, i, start, end)
				}
			}
		}
		checkTiling(t, ranges)
	}
	if got := splitPoints(nil, 3); got != nil {
		t.Fatalf("bounds of an empty sample: %q", got)
	}
	u := uniformSplits(4)
	if len(u) != 3 || !slices.IsSortedFunc(u, bytes.Compare) || u[1][0] != 0x7f {
		t.Fatalf("uniform bounds %x", u)
	}
	few := splitPoints([][]byte{[]byte("k")}, 3)
	if len(few) != 2 || !bytes.Equal(few[0], []byte("k")) || !bytes.Equal(few[1], []byte("k")) {
		t.Fatalf("bounds of a one-key sample for 3: %q", few)
	}
}

// TestKeySampler: the sample is bounded and depends only on the set of
// keys added, not on their order (two workers sampling the same keyspace
// compute the same bounds).
func TestKeySampler(t *testing.T) {
	rng := testRand(t)
	keys := make([][]byte, 5000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k%d", rng.Uint64())
	}
	var a, b keySampler
	for _, k := range keys {
		a.add(k)
	}
	for _, i := range rng.Perm(len(keys)) {
		b.add(keys[i])
	}
	sa, sb := a.sorted(), b.sorted()
	if len(sa) > sampleMax || len(sa) < sampleMax/4 {
		t.Fatalf("sample of %d keys has %d (max %d)", len(keys), len(sa), sampleMax)
	}
	if !slices.EqualFunc(sa, sb, bytes.Equal) {
		t.Fatalf("samples of one key set in two orders differ: %d vs %d keys", len(sa), len(sb))
	}
	var small keySampler
	for _, k := range keys[:100] {
		small.add(k)
	}
	if len(small.sorted()) != 100 {
		t.Fatalf("a sample of 100 keys kept %d", len(small.keys))
	}
}
