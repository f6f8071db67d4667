package graph

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
)

// Result is what became of a mutation.
type Result struct {
	// Dropped: the edge already held a newer version; nothing changed.
	Dropped bool
	// Existed: the edge was live just before the mutation applied, in the
	// order the edge's mutations applied (a delete with Existed false
	// deleted nothing; an insert with Existed true updated the edge).
	// False when Dropped.
	Existed bool
}

// Mutate applies m to its edge, by its label's consistency (doc.go).
func (g *Graph) Mutate(ctx context.Context, m Mutation) (Result, error) {
	l, err := g.checkMutation(ctx, &m)
	if err != nil {
		return Result{}, err
	}
	if m.ID == 0 {
		m.ID = rand.Uint64() | 1
	}
	switch l.Consistency {
	case Weak:
		return g.mutateWeak(ctx, l, &m)
	case Txn:
		return g.mutateTxn(ctx, l, &m)
	}
	return g.mutateStrong(ctx, l, &m)
}

func (g *Graph) checkMutation(ctx context.Context, m *Mutation) (*Label, error) {
	switch m.Op {
	case Insert, Update, Delete, Increment:
	default:
		return nil, fmt.Errorf("%w: operation %v", ErrInvalidArgument, m.Op)
	}
	if err := validVertex(m.Src); err != nil {
		return nil, err
	}
	if err := validVertex(m.Tgt); err != nil {
		return nil, err
	}
	if m.TS <= 0 {
		return nil, fmt.Errorf("%w: version %d is not positive", ErrInvalidArgument, m.TS)
	}
	l, err := g.Label(ctx, m.Label)
	if err != nil {
		return nil, err
	}
	if err := l.check(m.Props); err != nil {
		return nil, err
	}
	if m.Op == Increment {
		for k, v := range m.Props {
			if v.Type == String {
				return nil, fmt.Errorf("%w: increment of string property %s", ErrInvalidArgument, k)
			}
		}
	}
	if m.Op == Delete && len(m.Props) > 0 {
		return nil, fmt.Errorf("%w: a delete takes no properties", ErrInvalidArgument)
	}
	return l, nil
}

// checkRows refuses a mutation whose index rows would exceed the store's
// key limit (a long indexed string, long vertex ids): refused before the
// lock, it writes nothing; found after, it would wedge the edge.
func checkRows(m *Mutation, em *edgeMutate) error {
	for _, op := range em.index {
		if op.insert && len(op.row) > percolator.MaxRowSize {
			return fmt.Errorf("%w: %s -%s-> %s: an index row of %d bytes exceeds %d (indexed values and vertex ids too long)", ErrInvalidArgument, m.Src, m.Label, m.Tgt, len(op.row), percolator.MaxRowSize)
		}
	}
	return nil
}

// indexOp is one index edge written (insert) or removed at a mutation
// version.
type indexOp struct {
	row    []byte
	insert bool
	value  []byte
	ver    uint64
}

// degreeOp flips one edge's presence in a degree row at a version.
type degreeOp struct {
	row     []byte
	other   string
	present bool
	ver     uint64
}

// edgeMutate is S2Graph's EdgeMutate: every index edge and degree write
// that takes an edge from one state to the next, each safe to send twice
// or late.
type edgeMutate struct {
	index  []indexOp
	degree []degreeOp
}

// buildEdgeMutate builds the writes from before to after at version ver:
// for every index, in both directions, the old index edge deleted (unless
// it is the new one's row) and the new one written; the degrees flipped
// when the edge's liveness changes.
func buildEdgeMutate(l *Label, src, tgt string, before, after *edgeState, ver uint64) edgeMutate {
	var em edgeMutate
	var value []byte
	if after.live() {
		value, _ = json.Marshal(indexValue{TS: after.Version, Props: after.props()})
	}
	dirs := [2]struct {
		dir           byte
		vertex, other string
	}{{Out, src, tgt}, {In, tgt, src}}
	for i := range l.Indexes {
		ix := &l.Indexes[i]
		for _, d := range dirs {
			var oldRow, newRow []byte
			if before.live() {
				oldRow = indexRow(l.Name, ix, d.dir, d.vertex, d.other, before.props())
			}
			if after.live() {
				newRow = indexRow(l.Name, ix, d.dir, d.vertex, d.other, after.props())
			}
			if oldRow != nil && !bytes.Equal(oldRow, newRow) {
				em.index = append(em.index, indexOp{row: oldRow, ver: ver})
			}
			if newRow != nil {
				em.index = append(em.index, indexOp{row: newRow, insert: true, value: value, ver: ver})
			}
		}
	}
	if before.live() != after.live() {
		for _, d := range dirs {
			em.degree = append(em.degree, degreeOp{row: degreeRow(l.Name, d.dir, d.vertex), other: d.other, present: after.live(), ver: ver})
		}
	}
	return em
}

// mutations are op's writes to its index row: an insert puts the edge at
// op.ver and removes the older edge versions and every marker up to
// op.ver; a delete puts the marker at op.ver and removes the edge versions
// up to op.ver and the older markers. Each removal stops at op.ver, so
// applied after a write of a newer version it leaves that write, and the
// row's newest cell (edge or marker) says whether the edge is present
// (indexPresent), in whatever order the writes landed.
func (op indexOp) mutations() []storage.Mutation {
	if op.insert {
		return []storage.Mutation{
			storage.SetCell(Family, qualEdge, op.ver, op.value),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualEdge, Time: storage.Before(op.ver)},
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualGone, Time: storage.Before(op.ver + 1)},
		}
	}
	return []storage.Mutation{
		storage.SetCell(Family, qualGone, op.ver, nil),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualEdge, Time: storage.Before(op.ver + 1)},
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualGone, Time: storage.Before(op.ver)},
	}
}

func encodeCount(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

func decodeCount(b []byte) int64 {
	if len(b) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}
