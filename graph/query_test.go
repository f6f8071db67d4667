package graph

import (
	"errors"
	"github.com/seed-992972ee/percolator/storage"
	"math"
	"testing"
	"time"
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

// TestReviveAfterDelete: an update or an increment of a deleted edge
// revives it with its own properties only, as an insert does: what the
// delete removed does not come back (nor count in an increment), in the
// snapshot and in the index.
func TestReviveAfterDelete(t *testing.T) {
	for _, op := range []Op{Insert, Update, Increment} {
		t.Run(op.String(), func(t *testing.T) {
			g, _ := newGraph(t, Options{})
			mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: Props{"rating": FloatValue(1), "visits": IntValue(5)}})
			mustMutate(t, g, Mutation{Op: Delete, Label: "rates", Src: "a", Tgt: "b", TS: 2})
			mustMutate(t, g, Mutation{Op: op, Label: "rates", Src: "a", Tgt: "b", TS: 3, Props: Props{"visits": IntValue(1)}})
			e, live, err := g.GetEdge(ctx, "rates", "a", "b")
			_, hasRating := e.Props["rating"]
			if err != nil || !live || hasRating || e.Props["visits"].I != 1 {
				t.Fatalf("revived by %v: %+v live %v %v; want visits 1 and no rating", op, e.Props, live, err)
			}
			es, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: "a", Dir: Out})
			if _, ok := es[0].Props["rating"]; err != nil || len(es) != 1 || ok {
				t.Fatalf("index after revival by %v: %+v %v", op, es, err)
			}
			checkClean(t, g, "rates")
		})
	}
}

// TestTinyBackOff: a MaxBackOff of a few nanoseconds (someone meant
// milliseconds) backs off, rather than panicking, on a locked edge.
func TestTinyBackOff(t *testing.T) {
	g, st := newGraph(t, Options{MaxBackOff: 10, MaxRetries: 3, LockExpiry: time.Hour})
	row := snapshotRow("rates", "a", "b")
	locked := snapshot{Pending: []pending{{M: Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, ID: 1}, Ver: 1}}, LockedAt: time.Now().UnixMilli()}
	if err := st.Mutate(ctx, row, storage.SetCell(Family, qualSnapshot, 1, encodeSnapshot(&locked))); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 2}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a mutation of a locked edge: %v, want ErrLocked", err)
	}
}
