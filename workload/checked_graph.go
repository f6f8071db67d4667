package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/graph"
	"github.com/seed-992972ee/percolator/history"
)

// graphEdges is S2Graph's strong edges (package graph): inserts and
// deletes of 9 edges among 3 sources and 3 targets, each at a unique
// version (later wins) with the property v = its version; after the run,
// the graph's own check and a read of every edge. Checked: the check
// finds no mismatch, and every edge holds the newest version that may
// have been applied (no acknowledged mutation outdated, no failed one
// visible, no torn property).
type graphEdges struct {
	label string
	values
	last atomic.Int64 // the last version's clock reading
}

// version is a unique version that follows real time across the run's
// processes: CLOCK_MONOTONIC, made strictly increasing in this process,
// times 256 plus a tag of the process's own (its value base), so that the
// processes' versions interleave and none always wins.
func (w *graphEdges) version() int64 {
	for {
		last := w.last.Load()
		now := max(history.Now(), last+1)
		if w.last.CompareAndSwap(last, now) {
			return now*256 + (w.base>>40)%256
		}
	}
}

func (w *graphEdges) Name() string { return "graph" }

func (w *graphEdges) definition() graph.Label {
	return graph.Label{Name: w.label, Props: map[string]graph.Type{"v": graph.Int},
		Indexes: []graph.Index{{Name: "by_v", Props: []string{"v"}}}, Consistency: graph.Strong}
}

// Setup creates the label; every process creates the same one.
func (w *graphEdges) Setup(ctx context.Context, db *percolator.DB) error {
	return graph.New(db.Store(), graph.Options{}).CreateLabel(ctx, w.definition())
}

func (w *graphEdges) Next(rng *rand.Rand) (string, []history.Mop) {
	key := fmt.Sprintf("s%d>t%d", rng.IntN(3), rng.IntN(3))
	f := history.Insert
	if rng.IntN(3) == 0 {
		f = history.Remove
	}
	return "mutate", []history.Mop{{F: f, Key: key, Arg: w.version()}}
}

func (w *graphEdges) Apply(ctx context.Context, db *percolator.DB, f string, in []history.Mop) ([]history.Mop, error) {
	mops := cloneMops(in)
	g := graph.New(db.Store(), graph.Options{})
	if f == "final" {
		return mops, w.final(ctx, g, mops)
	}
	m := mops[0]
	src, tgt, _ := strings.Cut(m.Key, ">")
	mu := graph.Mutation{Op: graph.Insert, Label: w.label, Src: src, Tgt: tgt, TS: m.Arg, Props: graph.Props{"v": graph.IntValue(m.Arg)}}
	if m.F == history.Remove {
		mu.Op, mu.Props = graph.Delete, nil
	}
	_, err := g.Mutate(ctx, mu)
	return mops, err
}

// final runs the graph's check until no edge is locked (a killed
// mutation's lock is taken over once it expires), then reads every edge.
func (w *graphEdges) final(ctx context.Context, g *graph.Graph, mops []history.Mop) error {
	for {
		rep, err := g.Check(ctx, w.label)
		if err != nil {
			return err
		}
		if rep.Locked == 0 {
			mops[0].Read = []int64{int64(len(rep.Mismatches))}
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	for i := 1; i < len(mops); i++ {
		src, tgt, _ := strings.Cut(mops[i].Key, ">")
		e, ok, err := g.GetEdge(ctx, w.label, src, tgt)
		if err != nil {
			return err
		}
		mops[i].Read = []int64{}
		if ok {
			mops[i].Read = []int64{e.TS, e.Props["v"].I}
		}
	}
	return nil
}

func (w *graphEdges) Final() (string, []history.Mop) {
	mops := []history.Mop{{F: history.Checked, Key: "check"}}
	for s := range 3 {
		for t := range 3 {
			mops = append(mops, history.Mop{F: history.EdgeRead, Key: fmt.Sprintf("s%d>t%d", s, t)})
		}
	}
	return "final", mops
}

func (w *graphEdges) Check(h []history.Op) history.Result { return history.CheckGraph(h) }
