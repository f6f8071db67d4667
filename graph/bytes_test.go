package graph

import (
	"errors"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage/memory"
)

// TestNonUTF8Values: string values and vertex ids are bytes, not UTF-8
// text: 0xFF and NUL survive the snapshot and the index edges, an update
// replaces the index edge the old value made, and an expired lock whose
// vertices hold 0xFF is rolled forward onto the edge's own rows.
func TestNonUTF8Values(t *testing.T) {
	g, _ := newGraph(t, Options{})
	src, tgt := "s\xff\x00", "t\xfe"
	mustMutate(t, g, Mutation{Op: Insert, Label: "rates", Src: src, Tgt: tgt, TS: 1, Props: Props{"note": StringValue("\xff\x00a"), "rating": FloatValue(1)}})
	e, live, err := g.GetEdge(ctx, "rates", src, tgt)
	if err != nil || !live || e.Props["note"].S != "\xff\x00a" {
		t.Fatalf("snapshot: %+v live %v %v; want note %q", e, live, err, "\xff\x00a")
	}
	es, err := g.Neighbors(ctx, Query{Label: "rates", Vertex: src, Dir: Out, Index: "by_note"})
	if err != nil || len(es) != 1 || es[0].Props["note"].S != "\xff\x00a" || es[0].Tgt != tgt {
		t.Fatalf("by_note: %+v %v", es, err)
	}
	mustMutate(t, g, Mutation{Op: Update, Label: "rates", Src: src, Tgt: tgt, TS: 2, Props: Props{"note": StringValue("b")}})
	checkClean(t, g, "rates")

	// A crash right after the lock: the roll-forward decodes the pending
	// mutation's vertices from the stored snapshot.
	mem := memory.New()
	defer mem.Close()
	fs := newFaultStore(mem, 1)
	var c clock
	opts := Options{MaxRetries: 1, MaxBackOff: time.Millisecond, LockExpiry: time.Second, Now: c.now}
	g = New(fs, opts)
	if err := g.CreateLabel(ctx, rates); err != nil {
		t.Fatal(err)
	}
	fs.crashAfter.Store(3) // the label read, the fetch, the lock
	if _, err := g.Mutate(ctx, Mutation{Op: Insert, Label: "rates", Src: src, Tgt: tgt, TS: 1, Props: rating(2)}); err == nil {
		t.Fatal("the crash did not happen")
	}
	c.add(2 * time.Second)
	other := New(mem, opts)
	if rep := checkClean(t, other, "rates"); rep.Repaired != 1 || rep.Edges != 1 {
		t.Fatalf("check after the crash: %+v", rep)
	}
	if n, err := other.Degree(ctx, "rates", src, Out); err != nil || n != 1 {
		t.Fatalf("out-degree of %q: %d %v, want 1", src, n, err)
	}
}

// TestNonUTF8Names: a name that is not UTF-8 would be read back by
// another process as another name (labels are stored in JSON): refused.
func TestNonUTF8Names(t *testing.T) {
	g, _ := newGraph(t, Options{})
	for _, l := range []Label{
		{Name: "r\xff"},
		{Name: "r", Props: map[string]Type{"p\xff": Int}},
		{Name: "r", Props: map[string]Type{"p": Int}, Indexes: []Index{{Name: "i\xff", Props: []string{"p"}}}},
	} {
		if err := g.CreateLabel(ctx, l); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("label %+v: %v, want ErrInvalidArgument", l, err)
		}
	}
}
