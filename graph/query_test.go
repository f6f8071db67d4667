package graph

import (
	"math"
	"testing"
)

// TestQueryEdges: a range with From after To, and an offset beyond the
// end (up to the largest int), select nothing, on every consistency.
func TestQueryEdges(t *testing.T) {
	for _, c := range []Consistency{Strong, Txn} {
		t.Run(string(c), func(t *testing.T) {
			g := newGraphOf(t, c)
			mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: rating(2)})
			lo, hi := FloatValue(3), FloatValue(1)
			for _, q := range []Query{
				{Label: "rates", Vertex: "a", Dir: Out, From: &lo, To: &hi},
				{Label: "rates", Vertex: "a", Dir: Out, Offset: 5},
				{Label: "rates", Vertex: "a", Dir: Out, Offset: math.MaxInt, Limit: 1},
				{Label: "rates", Vertex: "a", Dir: Out, Offset: 1, Limit: math.MaxInt},
			} {
				es, err := g.Neighbors(ctx, q)
				if err != nil || len(es) != 0 {
					t.Errorf("%+v: %v %v, want nothing", q, es, err)
				}
			}
		})
	}
}
