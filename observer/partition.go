package observer

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/seed-992972ee/percolator/coord"
)

// Partition is one worker's view of how the live workers split the notify
// keyspace among themselves (WorkerOptions.Membership; doc.go,
// "Partitioned finding"). Immutable once made.
type Partition struct {
	// Version counts the changes of this worker's view (of its members or
	// its bounds). It is the worker's own: two workers' versions are not
	// comparable.
	Version uint64
	// Members are the live workers, sorted by Owner: member i scans
	// Range(i).
	Members []coord.Member
	// Splits are the len(Members)-1 inner bounds, ascending: member i's
	// range is [Splits[i-1], Splits[i]), from the start of the keyspace
	// for the first member and to its end for the last.
	Splits [][]byte
	// Self is this worker's index in Members, or -1 while it is not
	// listed (not yet, or no longer: it then scans the whole keyspace).
	Self int

	// Invariant: epoch moves exactly when Members does. A scanner that
	// sees it move makes its next pass over the whole keyspace, since the
	// other workers may still scan the ranges of the old member list.
	epoch uint64
	// sample is the sorted row keys the bounds were computed from (origins
	// of the passes over a range).
	sample [][]byte
}

// Range returns member i's range [start, end); nil is the keyspace's
// start (for start) or end (for end).
func (p *Partition) Range(i int) (start, end []byte) {
	if i > 0 {
		start = p.Splits[i-1]
	}
	if i < len(p.Splits) {
		end = p.Splits[i]
	}
	return start, end
}

// origin is a random place to begin a pass over member i's range: one of
// the sampled keys in it (so origins follow where the notifications
// are), or its start.
func (p *Partition) origin(rng *rand.Rand, i int) []byte {
	start, end := p.Range(i)
	lo, _ := slices.BinarySearchFunc(p.sample, start, bytes.Compare)
	hi := len(p.sample)
	if end != nil {
		hi, _ = slices.BinarySearchFunc(p.sample, end, bytes.Compare)
	}
	if k := rng.IntN(hi - lo + 1); k < hi-lo {
		return p.sample[lo+k]
	}
	return start
}

// inRange reports whether key lies in [start, end) (nil bounds open).
func inRange(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && (end == nil || bytes.Compare(key, end) < 0)
}

// sampleMax bounds the keys a sample keeps.
const sampleMax = 1024

// keySampler keeps a deterministic sample of the keys added: those whose
// hash has its top level bits clear, level growing until at most
// sampleMax are kept. Two workers that sample the same keys, in any order,
// keep the same sample, so they compute the same bounds; samples of
// nearly the same keys give nearly the same bounds.
type keySampler struct {
	level uint
	keys  [][]byte
}

func (s *keySampler) add(key []byte) {
	if !s.keeps(key) {
		return
	}
	s.keys = append(s.keys, bytes.Clone(key))
	for len(s.keys) > sampleMax && s.level < 64 {
		s.level++
		s.keys = slices.DeleteFunc(s.keys, func(k []byte) bool { return !s.keeps(k) })
	}
}

func (s *keySampler) keeps(key []byte) bool {
	return s.level == 0 || keyHash(key)>>(64-s.level) == 0
}

// sorted returns the sample in key order.
func (s *keySampler) sorted() [][]byte {
	slices.SortFunc(s.keys, bytes.Compare)
	return s.keys
}

// keyHash is a stable hash of a row key (the same in every process):
// FNV-1a, then a finalizer so that its top bits are well mixed.
func keyHash(key []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(key)
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// splitPoints returns the n-1 inner bounds that cut the sorted sample
// into n ranges of about equal counts (quantiles). A sample of fewer keys
// than n leaves some ranges empty. An empty sample gives nil: the caller
// keeps its bounds, or splits the key space evenly (uniformSplits).
func splitPoints(sample [][]byte, n int) [][]byte {
	if len(sample) == 0 || n <= 1 {
		return nil
	}
	out := make([][]byte, n-1)
	for i := 1; i < n; i++ {
		out[i-1] = sample[i*len(sample)/n]
	}
	return out
}

// uniformSplits cuts the space of 8-byte keys into n equal ranges: bounds
// for a notify keyspace with nothing in it to sample.
func uniformSplits(n int) [][]byte {
	if n <= 1 {
		return nil
	}
	out := make([][]byte, n-1)
	step := ^uint64(0) / uint64(n)
	for i := 1; i < n; i++ {
		out[i-1] = binary.BigEndian.AppendUint64(nil, step*uint64(i))
	}
	return out
}

// around is a pass over [start, end) beginning at origin: [origin, end),
// then [start, origin).
func around(origin, start, end []byte) [][2][]byte {
	spans := [][2][]byte{{origin, end}}
	if !bytes.Equal(origin, start) {
		spans = append(spans, [2][]byte{start, origin})
	}
	return spans
}
