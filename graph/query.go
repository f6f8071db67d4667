package graph

import (
	"bytes"
	"context"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// Query selects one vertex's edges of one label, in one index's order.
type Query struct {
	Label  string
	Vertex string
	// Dir is Out (the vertex's out-edges: it is their source) or In.
	Dir byte
	// Index names the index to read; "" means the label's first.
	Index string
	// From and To bound the index's first property, inclusive (nil:
	// unbounded). Edges without that property sort before every value:
	// a range with From leaves them out, one with only To keeps them.
	From, To *Value
	// Offset skips that many edges; Limit > 0 returns at most that many.
	Offset, Limit int
}

// Neighbors returns the edges q selects, in index order: one contiguous
// scan of the index's rows. An edge whose deletion is Done is never
// among them.
func (g *Graph) Neighbors(ctx context.Context, q Query) ([]Edge, error) {
	l, err := g.Label(ctx, q.Label)
	if err != nil {
		return nil, err
	}
	if err := validVertex(q.Vertex); err != nil {
		return nil, err
	}
	if q.Dir != Out && q.Dir != In {
		return nil, fmt.Errorf("%w: direction %q (Out or In)", ErrInvalidArgument, q.Dir)
	}
	if q.Offset < 0 || q.Limit < 0 {
		return nil, fmt.Errorf("%w: negative offset or limit", ErrInvalidArgument)
	}
	if len(l.Indexes) == 0 {
		return nil, fmt.Errorf("%w: label %s has no index to query", ErrInvalidArgument, l.Name)
	}
	ix := &l.Indexes[0]
	if q.Index != "" {
		var ok bool
		if ix, ok = l.index(q.Index); !ok {
			return nil, fmt.Errorf("%w: label %s has no index %s", ErrInvalidArgument, l.Name, q.Index)
		}
	}
	first := l.Props[ix.Props[0]]
	for _, b := range []*Value{q.From, q.To} {
		if b != nil && b.Type != first {
			return nil, fmt.Errorf("%w: index %s starts with %s, a %s, not a %s", ErrInvalidArgument, ix.Name, ix.Props[0], first, b.Type)
		}
	}
	prefix := indexPrefix(l.Name, ix.Name, q.Dir, q.Vertex)
	start, end := prefix, storage.PrefixEnd(prefix)
	if q.From != nil {
		start = appendValue(append(append([]byte(nil), prefix...), 1), *q.From)
	}
	if q.To != nil {
		end = storage.PrefixEnd(appendValue(append(append([]byte(nil), prefix...), 1), *q.To))
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil, nil // From after To: an empty range (a store refuses it)
	}
	if l.Consistency == Txn {
		return g.neighborsTxn(ctx, l, ix, q, start, end)
	}
	var out []Edge
	skip := q.Offset
	var derr error
	err = g.store.Scan(ctx, start, end, indexFilter(l), 0, func(r storage.Row) bool {
		cell, ok := indexPresent(r.Cells)
		if !ok {
			return true
		}
		if skip > 0 {
			skip--
			return true
		}
		e, err := decodeIndexEdge(l, ix, q, r.Key, cell.Value)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, e)
		return q.Limit == 0 || len(out) < q.Limit
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// otherVertex decodes the other vertex, the last part of an index row of
// ix (whose values it skips by their types).
func otherVertex(key []byte, l *Label, ix *Index) (string, bool) {
	rest := key[len(rowPrefix)+2:]
	for range 2 { // label, index
		var ok bool
		if _, rest, ok = readPart(rest); !ok {
			return "", false
		}
	}
	if len(rest) == 0 {
		return "", false
	}
	rest = rest[1:] // direction
	var ok bool
	if _, rest, ok = readPart(rest); !ok { // vertex
		return "", false
	}
	for _, p := range ix.Props {
		if len(rest) == 0 {
			return "", false
		}
		present := rest[0]
		rest = rest[1:]
		switch {
		case present == 0:
		case l.Props[p] == String:
			if _, rest, ok = readPart(rest); !ok {
				return "", false
			}
		case len(rest) >= 8:
			rest = rest[8:]
		default:
			return "", false
		}
	}
	v, rest, ok := readPart(rest)
	return v, ok && len(rest) == 0
}

// Degree returns the number of live edges of label at vertex in dir.
func (g *Graph) Degree(ctx context.Context, label, vertex string, dir byte) (int64, error) {
	l, err := g.Label(ctx, label)
	if err != nil {
		return 0, err
	}
	if err := validVertex(vertex); err != nil {
		return 0, err
	}
	if dir != Out && dir != In {
		return 0, fmt.Errorf("%w: direction %q (Out or In)", ErrInvalidArgument, dir)
	}
	q := qualCount
	switch l.Consistency {
	case Weak:
		q = qualWeakCount
	case Txn:
		return g.degreeTxn(ctx, l, degreeRow(label, dir, vertex))
	}
	r, err := g.store.ReadRow(ctx, degreeRow(label, dir, vertex), storage.Filter{{Family: Family, Qualifier: q, Limit: 1}})
	if err != nil || len(r.Cells) == 0 {
		return 0, err
	}
	return decodeCount(r.Cells[0].Value), nil
}

// GetEdge returns the edge (src, label, tgt) as its snapshot holds it,
// and whether it is live.
func (g *Graph) GetEdge(ctx context.Context, label, src, tgt string) (Edge, bool, error) {
	l, err := g.Label(ctx, label)
	if err != nil {
		return Edge{}, false, err
	}
	var s snapshot
	if l.Consistency == Txn {
		s, err = g.getTxn(ctx, l, src, tgt)
	} else {
		s, _, err = g.fetch(ctx, snapshotRow(label, src, tgt))
	}
	if err != nil || !s.Edge.live() {
		return Edge{}, false, err
	}
	return Edge{Src: src, Label: label, Tgt: tgt, TS: s.Edge.Version, Props: s.Edge.props()}, true, nil
}

// Neighbors2 returns the 2-step neighbourhood: the edges step selects
// from every vertex first reaches (step.Vertex is replaced by each), in
// the order of first, then of each step.
func (g *Graph) Neighbors2(ctx context.Context, first, step Query) ([]Edge, error) {
	hop, err := g.Neighbors(ctx, first)
	if err != nil {
		return nil, err
	}
	var out []Edge
	for _, e := range hop {
		q := step
		q.Vertex = e.Tgt
		if first.Dir == In {
			q.Vertex = e.Src
		}
		es, err := g.Neighbors(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// indexFilter selects what decides whether an index row of l holds an
// edge: its newest edge cell and, for a weak label, its newest marker. A
// strong label's index writes are CheckAndMutates that refuse an older
// version, so its rows never hold both; a weak label's are blind, and a
// late one can leave an older edge under a newer marker.
func indexFilter(l *Label) storage.Filter {
	f := storage.Filter{{Family: Family, Qualifier: qualEdge, Limit: 1}}
	if l.Consistency == Weak {
		f = append(f, storage.Selector{Family: Family, Qualifier: qualGone, Limit: 1})
	}
	return f
}

// indexPresent returns the edge cell of an index row read with
// indexFilter, if the edge is present: an edge cell newer than any marker.
func indexPresent(cells []storage.Cell) (storage.Cell, bool) {
	var edge storage.Cell
	var found bool
	var gone uint64
	for _, c := range cells {
		switch c.Qualifier {
		case qualEdge:
			edge, found = c, true
		case qualGone:
			gone = max(gone, c.TS)
		}
	}
	return edge, found && edge.TS > gone
}
