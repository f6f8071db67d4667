package observer

import (
	"math/rand/v2"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// fixedSource yields its values in turn.
type fixedSource struct{ vals []uint64 }

func (f *fixedSource) Uint64() uint64 {
	v := f.vals[0]
	f.vals = f.vals[1:]
	return v
}

// TestRandomKeyBelowReserved: a scanner's random start never falls among
// the rows reserved for the system, where a server refuses a scan to
// begin: a draw there is drawn again.
func TestRandomKeyBelowReserved(t *testing.T) {
	s := &scanner{rng: rand.New(&fixedSource{vals: []uint64{0xffff_abcf_71ff_40c3, 0xffff_0000_0000_0000, 0x1234_5678_9abc_def0}})}
	k := s.randomKey()
	if storage.IsReserved(k) || string(k) != "\x12\x34\x56\x78\x9a\xbc\xde\xf0" {
		t.Fatalf("randomKey = %q, want the first draw below %q", k, storage.ReservedPrefix)
	}
}
