package graph

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
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

// TestTakeoverRowLimit: a mutation that takes over an expired lock is
// refused when its index rows, built on the state the queued mutations
// leave, exceed the key limit — alone it would fit — and the edge is not
// wedged: the queued mutation is rolled forward by the next one.
func TestTakeoverRowLimit(t *testing.T) {
	var c clock
	g, st := newGraph(t, Options{MaxBackOff: time.Millisecond, MaxRetries: 2, LockExpiry: time.Second, Now: c.now})
	pair := Label{Name: "pair", Props: map[string]Type{"a": String, "b": String}, Indexes: []Index{{Name: "ab", Props: []string{"a", "b"}}}}
	if err := g.CreateLabel(ctx, pair); err != nil {
		t.Fatal(err)
	}
	long := func(c string) Value { return StringValue(strings.Repeat(c, 2040)) }
	p := Mutation{Op: Insert, Label: "pair", Src: "s", Tgt: "t", TS: 1, Props: Props{"a": long("a")}, ID: 1}
	locked := snapshot{Pending: []pending{{M: p, Ver: 1}}, LockedAt: c.now().UnixMilli()}
	if err := st.Mutate(ctx, snapshotRow("pair", "s", "t"), storage.SetCell(Family, qualSnapshot, 1, encodeSnapshot(&locked))); err != nil {
		t.Fatal(err)
	}
	c.add(2 * time.Second) // p's holder died
	_, err := g.Mutate(ctx, Mutation{Op: Update, Label: "pair", Src: "s", Tgt: "t", TS: 2, Props: Props{"b": long("b")}})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an update whose rows exceed the limit after the queued insert: %v, want ErrInvalidArgument", err)
	}
	if _, err := g.Mutate(ctx, Mutation{Op: Update, Label: "pair", Src: "s", Tgt: "t", TS: 3, Props: Props{"b": StringValue("b")}}); err != nil {
		t.Fatalf("the next mutation of the edge: %v", err)
	}
	e, live, err := g.GetEdge(ctx, "pair", "s", "t")
	if err != nil || !live || e.Props["a"] != long("a") || e.Props["b"].S != "b" {
		t.Fatalf("edge: %+v live %v %v", e, live, err)
	}
	checkClean(t, g, "pair")
}
