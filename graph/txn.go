package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
)

// Columns of a Txn label's cells, in percolator transactions (rows as for
// the other labels).
const (
	colSnapshot = "s" // the edge's state (a snapshot without pending)
	colEdge     = "e" // an index edge (indexValue)
	colCount    = "n" // a degree (8-byte count)
)

func (g *Graph) db(l *Label) (*percolator.DB, error) {
	if g.opts.DB == nil {
		return nil, fmt.Errorf("%w: label %s is of consistency txn, and the Graph has no DB (Options.DB)", ErrInvalidArgument, l.Name)
	}
	return g.opts.DB, nil
}

// mutateTxn applies m in one percolator transaction: read the snapshot,
// write the new one, the index edges and the degrees, commit — retried
// whole on conflict (a retry reads again, so nothing counts twice). A
// re-sent mutation finds its ID among the snapshot's settled ones.
func (g *Graph) mutateTxn(ctx context.Context, l *Label, m *Mutation) (Result, error) {
	db, err := g.db(l)
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = db.Update(ctx, func(tx *percolator.Txn) error {
		res = Result{}
		row := string(snapshotRow(l.Name, m.Src, m.Tgt))
		var s snapshot
		b, err := tx.Get(ctx, row, colSnapshot)
		switch {
		case errors.Is(err, percolator.ErrNotFound):
		case err != nil:
			return err
		default:
			if s, err = decodeSnapshot(b); err != nil {
				return err
			}
		}
		if r, ok := s.settled(m.ID); ok {
			res.Dropped, res.Existed = r.Dropped, r.Existed
			return nil
		}
		if s.Edge.dropped(m) {
			res.Dropped = true
			s.Recent = appendRecent(s.Recent, recent{ID: m.ID, Dropped: true})
			return tx.Set(row, colSnapshot, encodeSnapshot(&s))
		}
		before := s.Edge
		after := before.apply(m)
		em := buildEdgeMutate(l, m.Src, m.Tgt, &before, &after, 0)
		if err := checkRows(m, &em); err != nil {
			return err
		}
		for _, op := range em.index {
			if op.insert {
				err = tx.Set(string(op.row), colEdge, op.value)
			} else {
				err = tx.Delete(string(op.row), colEdge)
			}
			if err != nil {
				return err
			}
		}
		for _, op := range em.degree {
			n, err := txnCount(ctx, tx, string(op.row))
			if err != nil {
				return err
			}
			if op.present {
				n++
			} else {
				n--
			}
			if err := tx.Set(string(op.row), colCount, encodeCount(n)); err != nil {
				return err
			}
		}
		s.Edge = after
		res.Existed = before.live()
		s.Recent = appendRecent(s.Recent, recent{ID: m.ID, Existed: res.Existed})
		return tx.Set(row, colSnapshot, encodeSnapshot(&s))
	})
	return res, err
}

func appendRecent(rs []recent, r recent) []recent {
	rs = append(rs, r)
	if len(rs) > maxRecent {
		rs = rs[len(rs)-maxRecent:]
	}
	return rs
}

func txnCount(ctx context.Context, tx *percolator.Txn, row string) (int64, error) {
	b, err := tx.Get(ctx, row, colCount)
	if errors.Is(err, percolator.ErrNotFound) {
		return 0, nil
	}
	return decodeCount(b), err
}

// neighborsTxn is Neighbors of a Txn label: one scan in a snapshot.
func (g *Graph) neighborsTxn(ctx context.Context, l *Label, ix *Index, q Query, start, end []byte) ([]Edge, error) {
	db, err := g.db(l)
	if err != nil {
		return nil, err
	}
	var out []Edge
	err = db.View(ctx, func(tx *percolator.Txn) error {
		limit := 0
		if q.Limit > 0 && q.Offset <= math.MaxInt-q.Limit {
			limit = q.Offset + q.Limit // else no limit: the offset skips them all
		}
		kvs, err := tx.Scan(ctx, string(start), string(end), colEdge, limit)
		if err != nil {
			return err
		}
		if q.Offset < len(kvs) {
			kvs = kvs[q.Offset:]
		} else {
			kvs = nil
		}
		for _, kv := range kvs {
			e, err := decodeIndexEdge(l, ix, q, kv.Row, kv.Value)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// decodeIndexEdge is the edge an index row of q's vertex holds.
func decodeIndexEdge(l *Label, ix *Index, q Query, key, value []byte) (Edge, error) {
	other, ok := otherVertex(key, l, ix)
	var v indexValue
	if !ok || json.Unmarshal(value, &v) != nil {
		return Edge{}, fmt.Errorf("graph: corrupt index edge %q", key)
	}
	e := Edge{Label: l.Name, TS: v.TS, Props: v.Props, Src: q.Vertex, Tgt: other}
	if q.Dir == In {
		e.Src, e.Tgt = other, q.Vertex
	}
	return e, nil
}

// degreeTxn reads a Txn label's degree in a snapshot.
func (g *Graph) degreeTxn(ctx context.Context, l *Label, row []byte) (int64, error) {
	db, err := g.db(l)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.View(ctx, func(tx *percolator.Txn) error {
		n, err = txnCount(ctx, tx, string(row))
		return err
	})
	return n, err
}

// getTxn reads a Txn label's snapshot edge.
func (g *Graph) getTxn(ctx context.Context, l *Label, src, tgt string) (snapshot, error) {
	db, err := g.db(l)
	if err != nil {
		return snapshot{}, err
	}
	var s snapshot
	err = db.View(ctx, func(tx *percolator.Txn) error {
		b, err := tx.Get(ctx, string(snapshotRow(l.Name, src, tgt)), colSnapshot)
		if errors.Is(err, percolator.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		s, err = decodeSnapshot(b)
		return err
	})
	return s, err
}

// checkTxn is Check of a Txn label, in one snapshot: nothing is in flight.
func (g *Graph) checkTxn(ctx context.Context, l *Label) (Report, error) {
	db, err := g.db(l)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	err = db.View(ctx, func(tx *percolator.Txn) error {
		rep = Report{}
		c := newChecker(l)
		sp := appendPart([]byte(rowPrefix+"s/"), l.Name)
		kvs, err := tx.Scan(ctx, string(sp), string(storage.PrefixEnd(sp)), colSnapshot, 0)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			rest := kv.Row[len(sp):]
			src, rest, ok1 := readPart(rest)
			tgt, _, ok2 := readPart(rest)
			s, derr := decodeSnapshot(kv.Value)
			if !ok1 || !ok2 || derr != nil {
				rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("corrupt snapshot row %q", kv.Row))
				continue
			}
			c.expect(src, tgt, &s)
		}
		rep.Edges = c.live
		ip := appendPart([]byte(rowPrefix+"i/"), l.Name)
		kvs, err = tx.Scan(ctx, string(ip), string(storage.PrefixEnd(ip)), colEdge, 0)
		if err != nil {
			return err
		}
		index := map[string]edgeKey{}
		for _, kv := range kvs {
			index[string(kv.Row)] = edgeKey{} // one snapshot: nothing in flight
		}
		dp := appendPart([]byte(rowPrefix+"d/"), l.Name)
		kvs, err = tx.Scan(ctx, string(dp), string(storage.PrefixEnd(dp)), colCount, 0)
		if err != nil {
			return err
		}
		got := map[string]int64{}
		for _, kv := range kvs {
			got[string(kv.Row)] = decodeCount(kv.Value)
		}
		rep.Mismatches = append(rep.Mismatches, c.mismatches(index, nil, got, nil)...)
		return nil
	})
	sort.Strings(rep.Mismatches)
	return rep, err
}
