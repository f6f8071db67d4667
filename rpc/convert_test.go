package rpc

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// TestConvertRoundTrip: filters, mutations and cells come back from their
// wire form as they went, through a marshalled message, with names that
// hold NUL, 0xFF and invalid UTF-8, and empty ones.
func TestConvertRoundTrip(t *testing.T) {
	filter := storage.Filter{
		{Family: "lock", Qualifier: "c\x00\xff", Time: storage.Before(9)},
		{Family: "write", Qualifier: "", AllQualifiers: true, Limit: 3},
		{Family: "data", Qualifier: "\xc3\x28", Time: storage.At(7)},
	}
	muts := []storage.Mutation{
		storage.SetCell("lock", "c\x00", 5, []byte("v")),
		storage.DeleteCell("data", "", 4),
		{Kind: storage.DeleteCells, Family: "write", Qualifier: "q", Time: storage.TimeRange{Start: 1, End: 8}},
	}
	cells := []storage.Cell{
		{Family: "write", Qualifier: "c", TS: 9, Value: []byte{1}},
		{Family: "write", Qualifier: "c", TS: 8, Value: []byte{}},
		{Family: "data\xff", Qualifier: "", TS: 1, Value: []byte("x")},
	}
	req := roundTrip(t, &rpcpb.CheckAndMutateRequest{Predicate: FilterToPB(filter), IfTrue: MutationsToPB(muts)})
	if got := FilterFromPB(req.Predicate); !reflect.DeepEqual(got, filter) {
		t.Errorf("filter: got %+v, want %+v", got, filter)
	}
	gotMuts := MutationsFromPB(req.IfTrue)
	for i := range gotMuts {
		if gotMuts[i].Value == nil {
			gotMuts[i].Value = muts[i].Value // nil and empty are one on the wire
		}
	}
	if !reflect.DeepEqual(gotMuts, muts) {
		t.Errorf("mutations: got %+v, want %+v", gotMuts, muts)
	}
	resp := roundTrip(t, &rpcpb.ReadRowResponse{Cells: CellsToPB(cells)})
	gotCells := CellsFromPB(resp.Cells)
	for i := range gotCells {
		if gotCells[i].Value == nil {
			gotCells[i].Value = []byte{}
		}
	}
	if !reflect.DeepEqual(gotCells, cells) {
		t.Errorf("cells: got %+v, want %+v", gotCells, cells)
	}
}

func roundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConvertSharedNames: the names of one conversion share a slab, and
// an append to one of them does not change the next.
func TestConvertSharedNames(t *testing.T) {
	pb := FilterToPB(storage.Filter{{Family: "ab", Qualifier: "cd"}, {Family: "ef", Qualifier: "gh"}})
	_ = append(pb[0].Family, 'X')
	_ = append(pb[0].Qualifier, 'Y')
	if string(pb[0].Qualifier) != "cd" || string(pb[1].Family) != "ef" {
		t.Errorf("an append to a name changed the next: %q %q", pb[0].Qualifier, pb[1].Family)
	}
}

// TestConvertAllocations: a conversion allocates per call, not per
// element.
func TestConvertAllocations(t *testing.T) {
	filter := storage.Filter{
		{Family: "lock", Qualifier: "c", Time: storage.Before(9)},
		{Family: "lock", Qualifier: "c", Time: storage.From(10)},
		{Family: "write", Qualifier: "c", Time: storage.From(9)},
		{Family: "gcfence", Qualifier: "f", Time: storage.From(9)},
	}
	cells := []storage.Cell{
		{Family: "write", Qualifier: "c", TS: 9}, {Family: "write", Qualifier: "c", TS: 7},
		{Family: "write", Qualifier: "c", TS: 5}, {Family: "write", Qualifier: "c", TS: 3},
	}
	muts := []storage.Mutation{storage.SetCell("lock", "c", 5, nil), storage.SetCell("data", "c", 5, nil)}
	pbFilter, pbCells, pbMuts := FilterToPB(filter), CellsToPB(cells), MutationsToPB(muts)
	for _, c := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"FilterToPB", 4, func() { FilterToPB(filter) }},
		{"FilterFromPB", 2, func() { FilterFromPB(pbFilter) }},
		{"CellsToPB", 3, func() { CellsToPB(cells) }},
		{"CellsFromPB", 2, func() { CellsFromPB(pbCells) }},
		{"MutationsToPB", 3, func() { MutationsToPB(muts) }},
		{"MutationsFromPB", 2, func() { MutationsFromPB(pbMuts) }},
	} {
		if n := testing.AllocsPerRun(100, c.f); n > c.max {
			t.Errorf("%s: %v allocations, want at most %v", c.name, n, c.max)
		}
	}
}
