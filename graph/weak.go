package graph

import (
	"context"

	"github.com/seed-992972ee/percolator/storage"
)

// qualWeakCount is a weak label's degree: a plain Increment counter.
const qualWeakCount = "w"

// mutateWeak is S2Graph's weak consistency: fetch the snapshot, then write
// the new snapshot, the index edges and the degree in one batch, without a
// lock. Two writers of one edge both build on the snapshot they fetched:
// the later snapshot write wins, the index edges of both stay, and a
// re-sent or racing degree Increment counts twice (doc.go; weak_test.go
// shows each).
func (g *Graph) mutateWeak(ctx context.Context, l *Label, m *Mutation) (Result, error) {
	row := snapshotRow(l.Name, m.Src, m.Tgt)
	s, ver, err := g.fetch(ctx, row)
	if err != nil {
		return Result{}, err
	}
	if s.Edge.dropped(m) {
		return Result{Dropped: true}, nil
	}
	before := s.Edge
	after := before.apply(m)
	em := buildEdgeMutate(l, m.Src, m.Tgt, &before, &after, ver+1)
	if err := checkRows(m, &em); err != nil {
		return Result{}, err
	}
	next := snapshot{Edge: after}
	batch := []storage.RowMutation{{Row: row, Mutations: []storage.Mutation{
		storage.SetCell(Family, qualSnapshot, ver+1, encodeSnapshot(&next)),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualSnapshot, Time: storage.Before(ver + 1)},
	}}}
	for _, op := range em.index {
		var muts []storage.Mutation
		if op.insert {
			muts = []storage.Mutation{storage.SetCell(Family, qualEdge, op.ver, op.value),
				{Kind: storage.DeleteCells, Family: Family, Qualifier: qualEdge, Time: storage.Before(op.ver)}}
		} else {
			muts = []storage.Mutation{{Kind: storage.DeleteCells, Family: Family, Qualifier: qualEdge}}
		}
		batch = append(batch, storage.RowMutation{Row: op.row, Mutations: muts})
	}
	if err := g.mutateRows(ctx, batch); err != nil {
		return Result{}, err
	}
	for _, op := range em.degree {
		delta := int64(-1)
		if op.present {
			delta = 1
		}
		if _, err := g.store.Increment(ctx, op.row, Family, qualWeakCount, delta); err != nil {
			return Result{}, err
		}
	}
	return Result{Existed: before.live()}, nil
}

func (g *Graph) mutateRows(ctx context.Context, batch []storage.RowMutation) error {
	if b, ok := g.store.(storage.Batcher); ok {
		errs, err := b.MutateRows(ctx, batch)
		if err != nil {
			return err
		}
		for _, e := range errs {
			if e != nil {
				return e
			}
		}
		return nil
	}
	for _, r := range batch {
		if err := g.store.Mutate(ctx, r.Row, r.Mutations...); err != nil {
			return err
		}
	}
	return nil
}
