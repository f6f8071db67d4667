package graph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

type ctxKey struct{}

// TestSeedRace is the seed's race: Jone's rating of McDonald's is 1.0;
// updates to 3.0 (t1) and 5.0 (t2 > t1) both fetch the snapshot at 1.0
// and race for its lock, in both orders of winning. Afterwards the
// snapshot and every index hold 5.0 and the degree is unchanged.
func TestSeedRace(t *testing.T) {
	for _, first := range []string{"t1", "t2"} {
		t.Run(first+" locks first", func(t *testing.T) {
			mem := memory.New()
			defer mem.Close()
			fs := newFaultStore(mem, 1)
			g := New(fs, Options{MaxBackOff: 5 * time.Millisecond})
			if err := g.CreateLabel(ctx, rates); err != nil {
				t.Fatal(err)
			}
			mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "jone", Tgt: "mcdonalds", TS: 1, Props: rating(1.0)})
			snap := string(snapshotRow("rates", "jone", "mcdonalds"))
			var fetched sync.WaitGroup
			fetched.Add(2)
			var once [2]sync.Once
			firstLocked := make(chan struct{})
			var lockOnce sync.Once
			fs.afterRead = func(ctx context.Context, row []byte) {
				if string(row) != snap {
					return
				}
				if i, ok := ctx.Value(ctxKey{}).(int); ok {
					once[i].Do(func() { fetched.Done(); fetched.Wait() }) // both fetch 1.0 first
				}
			}
			fs.beforeCAS = func(ctx context.Context, row []byte) {
				if string(row) != snap {
					return
				}
				if name, ok := ctx.Value(ctxKey{}).(int); ok && ([2]string{"t1", "t2"})[name] != first {
					<-firstLocked // the loser's lock waits for the winner's
				}
			}
			fs.afterCAS = func(ctx context.Context, row []byte) {
				if name, ok := ctx.Value(ctxKey{}).(int); ok && string(row) == snap && ([2]string{"t1", "t2"})[name] == first {
					lockOnce.Do(func() { close(firstLocked) })
				}
			}
			var wg sync.WaitGroup
			res := make([]Result, 2)
			errs := make([]error, 2)
			for i, m := range []Mutation{
				{Op: Update, Label: "rates", Src: "jone", Tgt: "mcdonalds", TS: 2, Props: rating(3.0)},
				{Op: Update, Label: "rates", Src: "jone", Tgt: "mcdonalds", TS: 3, Props: rating(5.0)},
			} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], errs[i] = g.Mutate(context.WithValue(ctx, ctxKey{}, i), m)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			if first == "t2" && !res[0].Dropped {
				t.Errorf("t1 arrived after t2 was applied and was not dropped")
			}
			e, live, err := g.GetEdge(ctx, "rates", "jone", "mcdonalds")
			if err != nil || !live || e.Props["rating"].F != 5.0 {
				t.Fatalf("snapshot: %+v live %v err %v; want rating 5.0", e, live, err)
			}
			if got := ratingsOut(t, g, "jone"); !slices.Equal(got, []float64{5.0}) {
				t.Fatalf("index by_rating of jone: %v, want [5]", got)
			}
			for _, dir := range []byte{Out, In} {
				v := map[byte]string{Out: "jone", In: "mcdonalds"}[dir]
				if n, err := g.Degree(ctx, "rates", v, dir); err != nil || n != 1 {
					t.Fatalf("degree %c of %s: %d, %v; want 1", dir, v, n, err)
				}
			}
			checkClean(t, g, "rates")
		})
	}
}

// TestQueries: neighbours in index order with a range, limit and offset,
// in-edges, a second index, 2-step neighbourhoods and degrees; deleted
// edges are gone from every index.
func TestQueries(t *testing.T) {
	for _, c := range []Consistency{Strong, Txn} {
		t.Run(string(c), func(t *testing.T) { testQueries(t, c) })
	}
}

func testQueries(t *testing.T, c Consistency) {
	g := newGraphOf(t, c)
	for i, r := range []float64{4.5, 1.0, 3.0, 5.0, 2.0} {
		tgt := fmt.Sprint("place", i)
		mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "ann", Tgt: tgt, TS: 10, Props: Props{"rating": FloatValue(r), "note": StringValue(fmt.Sprint("n", 5-i))}})
		mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: tgt, Tgt: "zed", TS: 10, Props: rating(r)})
	}
	if got := ratingsOut(t, g, "ann"); !slices.Equal(got, []float64{1, 2, 3, 4.5, 5}) {
		t.Fatalf("ann's out-edges by rating: %v", got)
	}
	lo, hi := FloatValue(2), FloatValue(4.5)
	es, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: "ann", Dir: Out, From: &lo, To: &hi, Offset: 1, Limit: 1})
	if err != nil || len(es) != 1 || es[0].Props["rating"].F != 3 || es[0].Tgt != "place2" {
		t.Fatalf("range [2, 4.5], offset 1, limit 1: %+v, %v", es, err)
	}
	if es, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: "ann", Dir: Out, Offset: math.MaxInt, Limit: 2}); err != nil || len(es) != 0 {
		t.Fatalf("an offset of MaxInt: %+v, %v", es, err)
	}
	es, err = g.Neighbors(ctx, Query{Label: "rates", Vertex: "ann", Dir: Out, Index: "by_note"})
	if err != nil || len(es) != 5 || es[0].Props["note"].S != "n1" || es[4].Props["note"].S != "n5" {
		t.Fatalf("by_note: %+v, %v", es, err)
	}
	es, err = g.Neighbors(ctx, Query{Label: "rates", Vertex: "place3", Dir: In})
	if err != nil || len(es) != 1 || es[0].Src != "ann" || es[0].Tgt != "place3" {
		t.Fatalf("place3's in-edges: %+v, %v", es, err)
	}
	two, err := g.Neighbors2(ctx, Query{Label: "rates", Vertex: "ann", Dir: Out}, Query{Label: "rates", Dir: Out})
	if err != nil || len(two) != 5 {
		t.Fatalf("2-step from ann: %+v, %v", two, err)
	}
	for _, e := range two {
		if e.Tgt != "zed" {
			t.Fatalf("2-step edge %+v does not end at zed", e)
		}
	}
	mustMutate(t, g, Mutation{Op: Delete, Label: "rates", Src: "ann", Tgt: "place3", TS: 11})
	if got := ratingsOut(t, g, "ann"); !slices.Equal(got, []float64{1, 2, 3, 4.5}) {
		t.Fatalf("after deleting place3: %v", got)
	}
	if n, _ := g.Degree(ctx, "rates", "ann", Out); n != 4 {
		t.Fatalf("ann's out-degree %d, want 4", n)
	}
	if n, _ := g.Degree(ctx, "rates", "zed", In); n != 5 {
		t.Fatalf("zed's in-degree %d, want 5", n)
	}
	// A delete older than the edge is dropped; an insert after it revives.
	if r := mustMutate(t, g, Mutation{Op: Delete, Label: "rates", Src: "ann", Tgt: "place0", TS: 5}); !r.Dropped {
		t.Fatal("a delete older than the edge was applied")
	}
	mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: "ann", Tgt: "place3", TS: 12, Props: rating(9)})
	mustMutate(t, g, Mutation{Op: Increment, Label: "rates", Src: "ann", Tgt: "place3", TS: 13, Props: Props{"visits": IntValue(2)}})
	mustMutate(t, g, Mutation{Op: Increment, Label: "rates", Src: "ann", Tgt: "place3", TS: 14, Props: Props{"visits": IntValue(3)}})
	e, live, _ := g.GetEdge(ctx, "rates", "ann", "place3")
	if !live || e.Props["visits"].I != 5 || e.Props["rating"].F != 9 || e.Props["note"].S != "" {
		t.Fatalf("revived edge: %+v (live %v): want rating 9, visits 5, no note", e, live)
	}
	rep := checkClean(t, g, "rates")
	if rep.Edges != 10 {
		t.Fatalf("check saw %d live edges, want 10", rep.Edges)
	}
}

// TestBadInput: every bad call fails with ErrInvalidArgument (or
// ErrUnknownLabel) and writes nothing.
func TestBadInput(t *testing.T) {
	g, st := newGraph(t, Options{})
	before := dumpStore(t, st)
	long := strings.Repeat("x", MaxValueSize+1)
	for _, c := range []struct {
		name string
		call func() error
		want error
	}{
		{"unknown label", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "nope", Src: "a", Tgt: "b", TS: 1})
			return err
		}, ErrUnknownLabel},
		{"duplicate index", func() error {
			return g.CreateLabel(ctx, Label{Name: "d", Props: map[string]Type{"x": Int}, Indexes: []Index{{Name: "i", Props: []string{"x"}}, {Name: "i", Props: []string{"x"}}}})
		}, ErrInvalidArgument},
		{"index order duplicated", func() error {
			return g.CreateLabel(ctx, Label{Name: "d", Props: map[string]Type{"x": Int}, Indexes: []Index{{Name: "i", Props: []string{"x"}}, {Name: "j", Props: []string{"x"}}}})
		}, ErrInvalidArgument},
		{"index on an undeclared property", func() error {
			return g.CreateLabel(ctx, Label{Name: "d", Indexes: []Index{{Name: "i", Props: []string{"x"}}}})
		}, ErrInvalidArgument},
		{"bad consistency", func() error {
			return g.CreateLabel(ctx, Label{Name: "d", Consistency: "eventual"})
		}, ErrInvalidArgument},
		{"label redefined", func() error {
			l := rates
			l.Consistency = Weak
			return g.CreateLabel(ctx, l)
		}, ErrInvalidArgument},
		{"type mismatch", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: Props{"rating": StringValue("high")}})
			return err
		}, ErrInvalidArgument},
		{"undeclared property", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: Props{"color": StringValue("red")}})
			return err
		}, ErrInvalidArgument},
		{"empty vertex", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "", Tgt: "b", TS: 1})
			return err
		}, ErrInvalidArgument},
		{"oversized property", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: Props{"note": StringValue(long)}})
			return err
		}, ErrInvalidArgument},
		{"indexed value too long for a row key", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: Props{"note": StringValue(strings.Repeat("n", 4070))}})
			return err
		}, ErrInvalidArgument},
		{"long vertices and an indexed value", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: strings.Repeat("\x00", MaxVertexSize), Tgt: strings.Repeat("t", MaxVertexSize), TS: 1, Props: Props{"note": StringValue(strings.Repeat("\x00", 1500))}})
			return err
		}, ErrInvalidArgument},
		{"zero version", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: "a", Tgt: "b"})
			return err
		}, ErrInvalidArgument},
		{"increment of a string", func() error {
			_, err := g.Mutate(ctx, Mutation{Op: Increment, Label: "rates", Src: "a", Tgt: "b", TS: 1, Props: Props{"note": StringValue("x")}})
			return err
		}, ErrInvalidArgument},
		{"query with a bad direction", func() error {
			_, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: "a", Dir: 'x'})
			return err
		}, ErrInvalidArgument},
		{"query range of another type", func() error {
			v := StringValue("1")
			_, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: "a", Dir: Out, From: &v})
			return err
		}, ErrInvalidArgument},
	} {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if after := dumpStore(t, st); after != before {
		t.Fatalf("bad input changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

func dumpStore(t *testing.T, st storage.Store) string {
	t.Helper()
	var b bytes.Buffer
	err := st.Scan(ctx, nil, nil, storage.Filter{{Family: Family, AllQualifiers: true}}, 0, func(r storage.Row) bool {
		fmt.Fprintf(&b, "%q:", r.Key)
		for _, c := range r.Cells {
			fmt.Fprintf(&b, " %s@%d=%q", c.Qualifier, c.TS, c.Value)
		}
		b.WriteString("; ")
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
