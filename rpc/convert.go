package rpc

import (
	"strings"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// The conversions allocate per call, not per element: the messages of a
// call share one backing array, and the names (families, qualifiers) of a
// call are cut from one byte slab or one string. A converted message
// refers to its slab; the slab lives as long as any of them.

// byteSlab cuts byte slices from one allocation. Each slice is capped at
// its length, so an append to one cannot overwrite the next.
type byteSlab []byte

func newByteSlab(n int) byteSlab { return make(byteSlab, 0, n) }

func (b *byteSlab) cut(s string) []byte {
	n := len(*b)
	*b = append(*b, s...)
	return (*b)[n:len(*b):len(*b)]
}

// stringSlab cuts strings from one buffer: each string is the bytes
// written for it, which the buffer never changes after.
type stringSlab struct{ b strings.Builder }

func newStringSlab(n int) *stringSlab {
	s := new(stringSlab)
	s.b.Grow(n)
	return s
}

func (s *stringSlab) cut(p []byte) string {
	n := s.b.Len()
	s.b.Write(p)
	return s.b.String()[n:]
}

// FilterToPB converts a storage filter to its wire form.
func FilterToPB(f storage.Filter) []*rpcpb.Selector {
	out := make([]*rpcpb.Selector, len(f))
	sels := make([]rpcpb.Selector, len(f))
	n := 0
	for i := range f {
		n += len(f[i].Family) + len(f[i].Qualifier)
	}
	names := newByteSlab(n)
	var times []rpcpb.TimeRange
	for i := range f {
		s, pb := &f[i], &sels[i]
		pb.Family, pb.Qualifier, pb.AllQualifiers, pb.Limit = names.cut(s.Family), names.cut(s.Qualifier), s.AllQualifiers, int32(s.Limit)
		if s.Time != (storage.TimeRange{}) {
			if times == nil {
				times = make([]rpcpb.TimeRange, len(f))
			}
			times[i].Start, times[i].End = s.Time.Start, s.Time.End
			pb.Time = &times[i]
		}
		out[i] = pb
	}
	return out
}

// FilterFromPB converts a wire filter.
func FilterFromPB(f []*rpcpb.Selector) storage.Filter {
	if len(f) == 0 {
		return nil
	}
	n := 0
	for _, s := range f {
		n += len(s.GetFamily()) + len(s.GetQualifier())
	}
	names := newStringSlab(n)
	out := make(storage.Filter, len(f))
	for i, s := range f {
		if s == nil {
			continue // an empty selector selects nothing: its family is ""
		}
		out[i] = storage.Selector{Family: names.cut(s.Family), Qualifier: names.cut(s.Qualifier), AllQualifiers: s.AllQualifiers, Limit: int(s.Limit)}
		if t := s.Time; t != nil {
			out[i].Time = storage.TimeRange{Start: t.Start, End: t.End}
		}
	}
	return out
}

// MutationsToPB converts mutations to their wire form.
func MutationsToPB(ms []storage.Mutation) []*rpcpb.Mutation {
	if len(ms) == 0 {
		return nil
	}
	n := 0
	for i := range ms {
		n += len(ms[i].Family) + len(ms[i].Qualifier)
	}
	names := newByteSlab(n)
	out := make([]*rpcpb.Mutation, len(ms))
	backing := make([]rpcpb.Mutation, len(ms))
	var times []rpcpb.TimeRange
	for i := range ms {
		m, pb := &ms[i], &backing[i]
		pb.Kind, pb.Family, pb.Qualifier, pb.Ts, pb.Value = rpcpb.MutationKind(m.Kind), names.cut(m.Family), names.cut(m.Qualifier), m.TS, m.Value
		if m.Time != (storage.TimeRange{}) {
			if times == nil {
				times = make([]rpcpb.TimeRange, len(ms))
			}
			times[i].Start, times[i].End = m.Time.Start, m.Time.End
			pb.Time = &times[i]
		}
		out[i] = pb
	}
	return out
}

// MutationsFromPB converts wire mutations. An unknown kind is kept as it
// is, for the store's validation to refuse.
func MutationsFromPB(ms []*rpcpb.Mutation) []storage.Mutation {
	if len(ms) == 0 {
		return nil
	}
	n := 0
	for _, m := range ms {
		n += len(m.GetFamily()) + len(m.GetQualifier())
	}
	names := newStringSlab(n)
	out := make([]storage.Mutation, len(ms))
	for i, m := range ms {
		if m == nil {
			continue // kind 0: refused by validation
		}
		out[i] = storage.Mutation{Kind: storage.MutationKind(m.Kind), Family: names.cut(m.Family), Qualifier: names.cut(m.Qualifier), TS: m.Ts, Value: m.Value}
		if m.Kind != rpcpb.MutationKind(m.Kind&0xFF) {
			out[i].Kind = 0xFF // out of range: refused by validation
		}
		if t := m.Time; t != nil {
			out[i].Time = storage.TimeRange{Start: t.Start, End: t.End}
		}
	}
	return out
}

// CellsToPB converts cells to their wire form.
func CellsToPB(cs []storage.Cell) []*rpcpb.Cell {
	if len(cs) == 0 {
		return nil
	}
	n := 0
	for i := range cs {
		n += len(cs[i].Family) + len(cs[i].Qualifier)
	}
	names := newByteSlab(n)
	out := make([]*rpcpb.Cell, len(cs))
	backing := make([]rpcpb.Cell, len(cs))
	for i := range cs {
		c := &backing[i]
		c.Family, c.Qualifier, c.Ts, c.Value = names.cut(cs[i].Family), names.cut(cs[i].Qualifier), cs[i].TS, cs[i].Value
		out[i] = c
	}
	return out
}

// CellsFromPB converts wire cells.
func CellsFromPB(cs []*rpcpb.Cell) []storage.Cell {
	if len(cs) == 0 {
		return nil
	}
	n := 0
	for _, c := range cs {
		n += len(c.GetFamily()) + len(c.GetQualifier())
	}
	names := newStringSlab(n)
	out := make([]storage.Cell, len(cs))
	for i, c := range cs {
		out[i] = storage.Cell{Family: names.cut(c.GetFamily()), Qualifier: names.cut(c.GetQualifier()), TS: c.GetTs(), Value: c.GetValue()}
	}
	return out
}
