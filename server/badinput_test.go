package server_test

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// TestBadInput: malformed requests, as a buggy or hostile client may send
// them, are refused with InvalidArgument (ResourceExhausted for a message
// over the size limit) and a message saying what is wrong, and change
// nothing.
func TestBadInput(t *testing.T) {
	const limit = 1 << 20
	srv := servertest.Start(t, server.Options{MaxMessageSize: limit}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	st := servertest.Store(t, conn, remote.Options{})
	if _, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil {
		t.Fatal(err)
	}
	if err := st.Mutate(ctx, []byte("r"), storage.SetCell("c", "x", 1, []byte("not a counter"))); err != nil {
		t.Fatal(err)
	}
	group := bytes.Repeat([]byte{1}, server.GroupLen)
	if _, err := conn.Storage.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: group}); err != nil {
		t.Fatal(err)
	}
	settle(t, srv)
	before, last := snapshot(t, srv), allocate(t, conn)

	var (
		row  = []byte("r")
		put  = &rpcpb.Mutation{Kind: rpcpb.MutationKind_PUT, Family: []byte("c"), Qualifier: []byte("x"), Ts: 1, Value: []byte("v")}
		puts = []*rpcpb.Mutation{put}
		// stampable is a put with room for an async prewrite's stamp.
		stampable = []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_PUT, Family: []byte("c"), Qualifier: []byte("x"), Ts: 1, Value: make([]byte, 8)}}
		sel       = []*rpcpb.Selector{{Family: []byte("c"), AllQualifiers: true}}
		// An empty selector is what a nil element of a repeated field
		// decodes to on the server.
		emptySel = []*rpcpb.Selector{{}}
		nonce    = func(seq, low uint64) *rpcpb.Nonce { return &rpcpb.Nonce{Group: group, Seq: seq, LowWater: low} }
		many     = func(n int) []*rpcpb.Mutation {
			ms := make([]*rpcpb.Mutation, n)
			for i := range ms {
				ms[i] = put
			}
			return ms
		}
		manySel = func(n int) []*rpcpb.Selector {
			out := make([]*rpcpb.Selector, n)
			for i := range out {
				out[i] = sel[0]
			}
			return out
		}
		manyRows = func(n int) []*rpcpb.RowMutation {
			rows := make([]*rpcpb.RowMutation, n)
			for i := range rows {
				rows[i] = &rpcpb.RowMutation{Row: row, Mutations: puts}
			}
			return rows
		}
		s, o, c = conn.Storage, conn.Oracle, conn.Coord
	)
	scan := func(req *rpcpb.ScanRequest) error {
		stream, err := s.Scan(ctx, req)
		if err != nil {
			return err
		}
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	ignore := func(_ any, err error) error { return err }
	for _, tc := range []struct {
		name string
		code codes.Code
		msg  string
		call func() error
	}{
		{"ReadRow empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.ReadRow(ctx, &rpcpb.ReadRowRequest{Filter: sel}))
		}},
		{"ReadRow nil selector", codes.InvalidArgument, "family", func() error {
			return ignore(s.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: row, Filter: emptySel}))
		}},
		{"ReadRow negative limit", codes.InvalidArgument, "negative limit", func() error {
			return ignore(s.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: row, Filter: []*rpcpb.Selector{{Family: []byte("c"), Limit: -1}}}))
		}},
		{"ReadRow too many selectors", codes.InvalidArgument, "selectors", func() error {
			return ignore(s.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: row, Filter: manySel(server.MaxSelectors + 1)}))
		}},
		{"Scan negative limit", codes.InvalidArgument, "negative limit", func() error {
			return scan(&rpcpb.ScanRequest{Filter: sel, Limit: -1})
		}},
		{"Scan nil selector", codes.InvalidArgument, "family", func() error {
			return scan(&rpcpb.ScanRequest{Filter: emptySel})
		}},
		{"Scan end before start", codes.InvalidArgument, "", func() error {
			return scan(&rpcpb.ScanRequest{Start: []byte("z"), End: []byte("a"), Filter: sel})
		}},
		{"Mutate empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Mutations: puts}))
		}},
		{"Mutate no kind", codes.InvalidArgument, "kind", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: []*rpcpb.Mutation{{Family: []byte("c"), Qualifier: []byte("x")}}}))
		}},
		{"Mutate unknown kind", codes.InvalidArgument, "kind", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: []*rpcpb.Mutation{{Kind: 99, Family: []byte("c")}}}))
		}},
		{"Mutate kind above a byte", codes.InvalidArgument, "kind", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: []*rpcpb.Mutation{{Kind: 256 + rpcpb.MutationKind_PUT, Family: []byte("c")}}}))
		}},
		{"Mutate empty family", codes.InvalidArgument, "family", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_PUT, Qualifier: []byte("x")}}}))
		}},
		{"Mutate too many mutations", codes.InvalidArgument, "mutations", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: many(server.MaxMutations + 1)}))
		}},
		{"Mutate short nonce group", codes.InvalidArgument, "nonce group", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: puts, Nonce: &rpcpb.Nonce{Group: []byte("short"), Seq: 1}}))
		}},
		{"Mutate mark above the call", codes.InvalidArgument, "low-water", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: puts, Nonce: nonce(3, 4)}))
		}},
		{"CheckAndMutate empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.CheckAndMutate(ctx, &rpcpb.CheckAndMutateRequest{Predicate: sel, IfFalse: puts}))
		}},
		{"CheckAndMutate nil predicate selector", codes.InvalidArgument, "family", func() error {
			return ignore(s.CheckAndMutate(ctx, &rpcpb.CheckAndMutateRequest{Row: row, Predicate: emptySel, IfFalse: puts}))
		}},
		{"CheckAndMutate bad kind", codes.InvalidArgument, "kind", func() error {
			return ignore(s.CheckAndMutate(ctx, &rpcpb.CheckAndMutateRequest{Row: row, Predicate: sel, IfTrue: puts, IfFalse: []*rpcpb.Mutation{{Kind: 7}}}))
		}},
		{"MutateRows too many rows", codes.InvalidArgument, "rows", func() error {
			return ignore(s.MutateRows(ctx, &rpcpb.MutateRowsRequest{Rows: manyRows(server.MaxMutations + 1)}))
		}},
		{"MutateRows empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.MutateRows(ctx, &rpcpb.MutateRowsRequest{Rows: []*rpcpb.RowMutation{{Row: row, Mutations: puts}, {Mutations: puts}}}))
		}},
		{"MutateRows bad kind", codes.InvalidArgument, "kind", func() error {
			return ignore(s.MutateRows(ctx, &rpcpb.MutateRowsRequest{Rows: []*rpcpb.RowMutation{{Row: row, Mutations: puts}, {Row: row, Mutations: []*rpcpb.Mutation{{}}}}}))
		}},
		{"ReadRows empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.ReadRows(ctx, &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{{Row: row, Filter: sel}, {Filter: sel}}}))
		}},
		{"ReadRows nil read", codes.InvalidArgument, "empty", func() error {
			return ignore(s.ReadRows(ctx, &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{nil}}))
		}},
		{"ReadRows nil selector", codes.InvalidArgument, "family", func() error {
			return ignore(s.ReadRows(ctx, &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{{Row: row, Filter: emptySel}}}))
		}},
		{"CheckAndMutateRows empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.CheckAndMutateRows(ctx, &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{{Row: row, IfFalse: puts}, {IfFalse: puts}}}))
		}},
		{"CheckAndMutateRows a row twice", codes.InvalidArgument, "twice", func() error {
			return ignore(s.CheckAndMutateRows(ctx, &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{{Row: row, IfFalse: puts}, {Row: row, IfFalse: puts}}}))
		}},
		{"CheckAndMutateRows bad kind", codes.InvalidArgument, "kind", func() error {
			return ignore(s.CheckAndMutateRows(ctx, &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{{Row: row, IfFalse: puts}, {Row: []byte("r2"), IfTrue: []*rpcpb.Mutation{{}}}}}))
		}},
		{"CheckAndMutateRows nil selector", codes.InvalidArgument, "family", func() error {
			return ignore(s.CheckAndMutateRows(ctx, &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{{Row: row, Predicate: emptySel, IfFalse: puts}}}))
		}},
		{"CheckAndMutateInEpoch no check", codes.InvalidArgument, "no check", func() error {
			return ignore(s.CheckAndMutateInEpoch(ctx, &rpcpb.CheckAndMutateInEpochRequest{Epoch: 1}))
		}},
		{"CheckAndMutateInEpoch a row twice", codes.InvalidArgument, "twice", func() error {
			return ignore(s.CheckAndMutateInEpoch(ctx, &rpcpb.CheckAndMutateInEpochRequest{Epoch: 1,
				Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts}, Then: []*rpcpb.RowMutation{{Row: row, Mutations: puts}}}))
		}},
		{"CheckAndMutateInEpoch then empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.CheckAndMutateInEpoch(ctx, &rpcpb.CheckAndMutateInEpochRequest{Epoch: 1,
				Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts}, Then: []*rpcpb.RowMutation{{Mutations: puts}}}))
		}},
		{"CheckAndMutateInEpoch another epoch", codes.FailedPrecondition, "epoch changed", func() error {
			return ignore(s.CheckAndMutateInEpoch(ctx, &rpcpb.CheckAndMutateInEpochRequest{Epoch: 1 << 40,
				Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts, IfFalse: puts}, Then: []*rpcpb.RowMutation{{Row: []byte("r2"), Mutations: puts}}}))
		}},
		{"ReadRowsFresh an empty filter", codes.InvalidArgument, "names its selectors", func() error {
			return ignore(s.ReadRowsFresh(ctx, &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{{Row: row}}}))
		}},
		{"ReadRowsFresh an empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.ReadRowsFresh(ctx, &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{{Filter: sel}}}))
		}},
		{"CommitInEpoch no check", codes.InvalidArgument, "no check", func() error {
			return ignore(s.CommitInEpoch(ctx, &rpcpb.CommitInEpochRequest{Epoch: 1}))
		}},
		{"CommitInEpoch nothing to stamp", codes.InvalidArgument, "nothing to stamp", func() error {
			return ignore(s.CommitInEpoch(ctx, &rpcpb.CommitInEpochRequest{Epoch: 1, Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts}}))
		}},
		{"CommitInEpoch a stamped row not written", codes.InvalidArgument, "neither", func() error {
			return ignore(s.CommitInEpoch(ctx, &rpcpb.CommitInEpochRequest{Epoch: 1, Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts},
				Stamped: []*rpcpb.RowMutation{{Row: []byte("r2"), Mutations: puts}}}))
		}},
		{"CommitInEpoch a delete stamped", codes.InvalidArgument, "puts only", func() error {
			return ignore(s.CommitInEpoch(ctx, &rpcpb.CommitInEpochRequest{Epoch: 1, Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts},
				Stamped: []*rpcpb.RowMutation{{Row: row, Mutations: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}}}}))
		}},
		{"CommitInEpoch another epoch", codes.FailedPrecondition, "epoch changed", func() error {
			return ignore(s.CommitInEpoch(ctx, &rpcpb.CommitInEpochRequest{Epoch: 1 << 40, Check: &rpcpb.RowCheck{Row: row, Predicate: sel, IfTrue: puts},
				Stamped: []*rpcpb.RowMutation{{Row: row, Mutations: puts}}}))
		}},
		{"CommitOnePhase nothing to stamp", codes.InvalidArgument, "nothing to stamp", func() error {
			return ignore(s.CommitOnePhase(ctx, &rpcpb.CommitOnePhaseRequest{Row: row, Predicate: sel, Mutations: puts}))
		}},
		{"CommitOnePhase empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.CommitOnePhase(ctx, &rpcpb.CommitOnePhaseRequest{Predicate: sel, Stamped: puts}))
		}},
		{"CommitOnePhase a delete stamped", codes.InvalidArgument, "puts only", func() error {
			return ignore(s.CommitOnePhase(ctx, &rpcpb.CommitOnePhaseRequest{Row: row, Stamped: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}}))
		}},
		{"CommitOnePhase nil selector", codes.InvalidArgument, "family", func() error {
			return ignore(s.CommitOnePhase(ctx, &rpcpb.CommitOnePhaseRequest{Row: row, Predicate: emptySel, Stamped: puts}))
		}},
		{"PrewriteAsync no check", codes.InvalidArgument, "at least 1", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{}))
		}},
		{"PrewriteAsync a nil check (an empty one on the server)", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{nil}}))
		}},
		{"PrewriteAsync empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{{Predicate: sel, Stamped: stampable}}}))
		}},
		{"PrewriteAsync a value too short to stamp", codes.InvalidArgument, "stamp", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{{Row: row, Predicate: sel, Stamped: puts}}}))
		}},
		{"PrewriteAsync a delete stamped", codes.InvalidArgument, "stamp", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{{Row: row, Stamped: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}}}}))
		}},
		{"PrewriteAsync a row twice", codes.InvalidArgument, "twice", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{
				{Row: row, Predicate: sel, Stamped: stampable}, {Row: row, Predicate: sel, Stamped: stampable}}}))
		}},
		{"PrewriteAsync nil selector", codes.InvalidArgument, "family", func() error {
			return ignore(s.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{{Row: row, Predicate: emptySel, Stamped: stampable}}}))
		}},
		{"Increment empty row", codes.InvalidArgument, "empty row", func() error {
			return ignore(s.Increment(ctx, &rpcpb.IncrementRequest{Family: []byte("c"), Qualifier: []byte("n"), Delta: 1}))
		}},
		{"Increment empty family", codes.InvalidArgument, "family", func() error {
			return ignore(s.Increment(ctx, &rpcpb.IncrementRequest{Row: []byte("ctr"), Qualifier: []byte("n"), Delta: 1}))
		}},
		{"Increment of a non-counter", codes.InvalidArgument, "increment", func() error {
			return ignore(s.Increment(ctx, &rpcpb.IncrementRequest{Row: []byte("r"), Family: []byte("c"), Qualifier: []byte("x"), Delta: 1}))
		}},
		{"CompactFamily empty family", codes.InvalidArgument, "family", func() error {
			return ignore(s.CompactFamily(ctx, &rpcpb.CompactFamilyRequest{}))
		}},
		{"OpenNonceGroup short group", codes.InvalidArgument, "nonce group", func() error {
			return ignore(s.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: []byte{1, 2}}))
		}},
		{"Allocate zero", codes.InvalidArgument, "count", func() error {
			return ignore(o.Allocate(ctx, &rpcpb.AllocateRequest{}))
		}},
		{"Allocate huge", codes.InvalidArgument, "count", func() error {
			return ignore(o.Allocate(ctx, &rpcpb.AllocateRequest{Count: 1<<32 - 1}))
		}},
		{"OpenSession no owner", codes.InvalidArgument, "owner", func() error {
			return ignore(c.OpenSession(ctx, &rpcpb.OpenSessionRequest{TtlMs: 1000}))
		}},
		{"OpenSession zero ttl", codes.InvalidArgument, "ttl", func() error {
			return ignore(c.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "o"}))
		}},
		{"OpenSession huge ttl", codes.InvalidArgument, "ttl 4611686018427387904ms outside", func() error {
			return ignore(c.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "o", TtlMs: 1 << 62}))
		}},
		// 2^58+1000 ms is 2^64·15625 ns + 1s: as a Duration, 1s.
		{"OpenSession ttl wrapping into range", codes.InvalidArgument, "ttl", func() error {
			return ignore(c.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "o", TtlMs: 1<<58 + 1000}))
		}},
		{"TryLock empty key", codes.InvalidArgument, "key", func() error {
			return ignore(c.TryLock(ctx, &rpcpb.TryLockRequest{Session: "s"}))
		}},
		{"oversized message", codes.ResourceExhausted, "larger than max", func() error {
			return ignore(s.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_PUT, Family: []byte("c"), Qualifier: []byte("x"), Value: make([]byte, limit+1)}}}))
		}},
	} {
		err := tc.call()
		wantCode(t, tc.name, err, tc.code, tc.msg)
		if strings.Contains(status.Convert(err).Message(), "rpc error") {
			t.Errorf("%s: the message repeats the status: %q", tc.name, status.Convert(err).Message())
		}
	}
	if n := metric(t, srv, "percolator_sessions"); n != 0 {
		t.Errorf("%v sessions opened by refused calls", n)
	}
	settle(t, srv)
	unchanged(t, srv, conn, before, last)
}
