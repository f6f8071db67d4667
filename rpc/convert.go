package rpc

import (
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// FilterToPB converts a storage filter to its wire form (one allocation
// for the selectors, one for their time ranges).
func FilterToPB(f storage.Filter) []*rpcpb.Selector {
	out := make([]*rpcpb.Selector, len(f))
	sels := make([]rpcpb.Selector, len(f))
	var times []rpcpb.TimeRange
	for i := range f {
		s, pb := &f[i], &sels[i]
		pb.Family, pb.Qualifier, pb.AllQualifiers, pb.Limit = []byte(s.Family), []byte(s.Qualifier), s.AllQualifiers, int32(s.Limit)
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
	out := make(storage.Filter, len(f))
	for i, s := range f {
		if s == nil {
			continue // an empty selector selects nothing: its family is ""
		}
		out[i] = storage.Selector{Family: string(s.Family), Qualifier: string(s.Qualifier), AllQualifiers: s.AllQualifiers, Limit: int(s.Limit)}
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
	out := make([]*rpcpb.Mutation, len(ms))
	for i := range ms {
		m := &ms[i]
		out[i] = &rpcpb.Mutation{Kind: rpcpb.MutationKind(m.Kind), Family: []byte(m.Family), Qualifier: []byte(m.Qualifier), Ts: m.TS, Value: m.Value}
		if m.Time != (storage.TimeRange{}) {
			out[i].Time = &rpcpb.TimeRange{Start: m.Time.Start, End: m.Time.End}
		}
	}
	return out
}

// MutationsFromPB converts wire mutations. An unknown kind is kept as it
// is, for the store's validation to refuse.
func MutationsFromPB(ms []*rpcpb.Mutation) []storage.Mutation {
	if len(ms) == 0 {
		return nil
	}
	out := make([]storage.Mutation, len(ms))
	for i, m := range ms {
		if m == nil {
			continue // kind 0: refused by validation
		}
		out[i] = storage.Mutation{Kind: storage.MutationKind(m.Kind), Family: string(m.Family), Qualifier: string(m.Qualifier), TS: m.Ts, Value: m.Value}
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
	out := make([]*rpcpb.Cell, len(cs))
	backing := make([]rpcpb.Cell, len(cs))
	for i := range cs {
		c := &backing[i]
		c.Family, c.Qualifier, c.Ts, c.Value = []byte(cs[i].Family), []byte(cs[i].Qualifier), cs[i].TS, cs[i].Value
		out[i] = c
	}
	return out
}

// CellsFromPB converts wire cells.
func CellsFromPB(cs []*rpcpb.Cell) []storage.Cell {
	if len(cs) == 0 {
		return nil
	}
	out := make([]storage.Cell, len(cs))
	for i, c := range cs {
		out[i] = storage.Cell{Family: string(c.GetFamily()), Qualifier: string(c.GetQualifier()), TS: c.GetTs(), Value: c.GetValue()}
	}
	return out
}
