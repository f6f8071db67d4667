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
		// Versioned: a delete leaves a marker at its version and removes
		// the edge only up to it (indexOp.mutations), as strong labels do.
		batch = append(batch, storage.RowMutation{Row: op.row, Mutations: op.mutations()})
	}
	if err := g.mutateRows(ctx, batch); err != nil {
		return Result{}, err
	}
	for _, op := range em.degree {
		delta := int64(-1)
		if op.present {
			delta = 1
		}
		// Not idempotent: a nonce over a server; on Bigtable a failure
		// is an unknown outcome. Counted twice or not at all then (doc.go).
		if _, err := g.store.Increment(ctx, op.row, Family, qualWeakCount, delta); err != nil {
			return Result{}, err
		}
	}
	return Result{Existed: before.live()}, nil
}

// mutateRows sends a weak mutation's batch. It is safe to apply twice in
// any order, as Bigtable's client may (it re-sends a failed MutateRows):
// the snapshot is put at its own version and older ones removed, so a
// late copy adds an older version under the newest; each index write
// removes only versions up to its own (indexOp.mutations). So it goes
// without a nonce where the store offers that.
func (g *Graph) mutateRows(ctx context.Context, batch []storage.RowMutation) error {
	if b, ok := g.store.(storage.IdempotentBatcher); ok {
		errs, err := b.MutateRowsIdempotent(ctx, batch)
		return firstErr(errs, err)
	}
	if b, ok := g.store.(storage.Batcher); ok {
		errs, err := b.MutateRows(ctx, batch)
		return firstErr(errs, err)
	}
	for _, r := range batch {
		if err := g.store.Mutate(ctx, r.Row, r.Mutations...); err != nil {
			return err
		}
	}
	return nil
}

// firstErr is err, or the first of errs.
func firstErr(errs []error, err error) error {
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
