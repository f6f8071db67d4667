package graph

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// randValue draws a value of type t, favouring the edges: NUL and 0xFF
// bytes, empty strings, -0, ±min/max ints and floats.
func randValue(rng *rand.Rand, t Type) Value {
	switch t {
	case Int:
		edge := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
		if rng.IntN(3) == 0 {
			return IntValue(edge[rng.IntN(len(edge))])
		}
		return IntValue(int64(rng.Uint64()) >> rng.IntN(64))
	case Float:
		edge := []float64{math.Copysign(0, -1), 0, -math.MaxFloat64, math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 1, -1}
		if rng.IntN(3) == 0 {
			return FloatValue(edge[rng.IntN(len(edge))])
		}
		for {
			f := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return FloatValue(f)
			}
		}
	}
	alphabet := []byte{0, 1, 0xff, 0xfe, 'a', 'b'}
	b := make([]byte, rng.IntN(5))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return StringValue(string(b))
}

// cmpValue orders values of one type; a missing value (nil) first.
func cmpValue(a, b *Value) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch a.Type {
	case Int:
		return cmpOrdered(a.I, b.I)
	case Float:
		return cmpOrdered(a.F, b.F) // -0 == 0
	}
	return strings.Compare(a.S, b.S)
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestIndexRowOrder: for every pair of types, index rows of random
// values (some missing) sort as the values do, then by the other vertex;
// and the other vertex decodes back from every row.
func TestIndexRowOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 3))
	types := []Type{Int, Float, String}
	for _, t1 := range types {
		for _, t2 := range types {
			l := &Label{Name: "l\xff", Props: map[string]Type{"a": t1, "b": t2}, Indexes: []Index{{Name: "ab", Props: []string{"a", "b"}}}}
			ix := &l.Indexes[0]
			type ent struct {
				a, b  *Value
				other string
				row   []byte
			}
			var es []ent
			for range 400 {
				var e ent
				props := Props{}
				if rng.IntN(5) > 0 {
					v := randValue(rng, t1)
					e.a, props["a"] = &v, v
				}
				if rng.IntN(5) > 0 {
					v := randValue(rng, t2)
					e.b, props["b"] = &v, v
				}
				e.other = randValue(rng, String).S + "x"
				e.row = indexRow(l.Name, ix, Out, "v\x00\xff", e.other, props)
				es = append(es, e)
			}
			sort.SliceStable(es, func(i, j int) bool { return bytes.Compare(es[i].row, es[j].row) < 0 })
			for i := 1; i < len(es); i++ {
				p, q := es[i-1], es[i]
				c := cmpValue(p.a, q.a)
				if c == 0 {
					c = cmpValue(p.b, q.b)
				}
				if c == 0 {
					c = strings.Compare(p.other, q.other)
				}
				if c > 0 {
					t.Fatalf("%s,%s: row of (%v,%v,%q) sorts before (%v,%v,%q)", t1, t2, p.a, p.b, p.other, q.a, q.b, q.other)
				}
			}
			for _, e := range es {
				got, ok := otherVertex(e.row, l, ix)
				if !ok || got != e.other {
					t.Fatalf("%s,%s: other vertex of %q decodes as %q %v, want %q", t1, t2, e.row, got, ok, e.other)
				}
			}
		}
	}
}

// TestRangeBounds: a range query's start and end enclose exactly the rows
// whose first value lies in [From, To].
func TestRangeBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 4))
	for _, typ := range []Type{Int, Float, String} {
		l := &Label{Name: "l", Props: map[string]Type{"a": typ}, Indexes: []Index{{Name: "a", Props: []string{"a"}}}}
		ix := &l.Indexes[0]
		for range 2000 {
			lo, hi, v := randValue(rng, typ), randValue(rng, typ), randValue(rng, typ)
			prefix := indexPrefix(l.Name, ix.Name, Out, "v")
			start := appendValue(append(append([]byte(nil), prefix...), 1), lo)
			end := storage.PrefixEnd(appendValue(append(append([]byte(nil), prefix...), 1), hi))
			row := indexRow(l.Name, ix, Out, "v", "w\x00", Props{"a": v})
			in := bytes.Compare(row, start) >= 0 && bytes.Compare(row, end) < 0
			want := cmpValue(&lo, &v) <= 0 && cmpValue(&v, &hi) <= 0
			if in != want {
				t.Fatalf("%s: value %v in [%v, %v]: rows say %v", typ, v, lo, hi, in)
			}
		}
	}
}
