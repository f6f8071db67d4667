package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// reservedRows are rows of the server's reserved namespace: the oracle's
// mark, the prefix itself, bytes after it, and one of the largest size.
func reservedRows() [][]byte {
	long := append([]byte(storage.ReservedPrefix), bytes.Repeat([]byte{0xff}, storage.MaxRowKeySize-len(storage.ReservedPrefix))...)
	return [][]byte{oracle.StoreMarkRow(), []byte(storage.ReservedPrefix), []byte(storage.ReservedPrefix + "x\x00\xff"), long}
}

// TestReservedRowsRefused: every storage RPC that names a reserved row is
// refused with PermissionDenied and changes nothing — no cell, no nonce
// record, no timestamp, and the oracle's lease stays its own (a client
// that could delete the mark row once made a running oracle lose its
// lease while health said SERVING, and a restarted one resume at 1).
func TestReservedRowsRefused(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	st := servertest.Store(t, conn, remote.Options{})
	if err := st.Mutate(ctx, []byte("ok"), storage.SetCell("c", "x", 1, []byte("v"))); err != nil {
		t.Fatal(err)
	}
	group := bytes.Repeat([]byte{7}, server.GroupLen)
	if _, err := conn.Storage.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: group}); err != nil {
		t.Fatal(err)
	}
	settle(t, srv)
	before, last := snapshot(t, srv), allocate(t, conn)
	mark := leaseRecord(t, srv)

	put := &rpcpb.Mutation{Kind: rpcpb.MutationKind_PUT, Family: []byte("c"), Qualifier: []byte("x"), Ts: 9, Value: []byte("w")}
	calls := func(row []byte, seq uint64) map[string]func() error {
		nonce := &rpcpb.Nonce{Group: group, Seq: seq, LowWater: 1}
		oracleSel := []*rpcpb.Selector{{Family: []byte(oracle.FamilyOracle), AllQualifiers: true}}
		mut := func(ms ...*rpcpb.Mutation) error {
			_, err := conn.Storage.Mutate(ctx, &rpcpb.MutateRequest{Row: row, Mutations: ms, Nonce: nonce})
			return err
		}
		return map[string]func() error{
			"ReadRow": func() error {
				_, err := conn.Storage.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: row, Filter: oracleSel})
				return err
			},
			"Scan": func() error {
				s, err := conn.Storage.Scan(ctx, &rpcpb.ScanRequest{Start: row, Filter: oracleSel})
				if err != nil {
					return err
				}
				_, err = s.Recv()
				return err
			},
			"Mutate put":       func() error { return mut(put) },
			"Mutate DeleteRow": func() error { return mut(&rpcpb.Mutation{Kind: rpcpb.MutationKind_DELETE_ROW}) },
			"Mutate DeleteCells": func() error {
				return mut(&rpcpb.Mutation{Kind: rpcpb.MutationKind_DELETE_CELLS, Family: []byte(oracle.FamilyOracle), Qualifier: []byte("lease")})
			},
			"CheckAndMutate": func() error {
				_, err := conn.Storage.CheckAndMutate(ctx, &rpcpb.CheckAndMutateRequest{Row: row, Predicate: oracleSel,
					IfTrue: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}, IfFalse: []*rpcpb.Mutation{put}, Nonce: nonce})
				return err
			},
			"CheckAndMutate without nonce": func() error {
				_, err := conn.Storage.CheckAndMutate(ctx, &rpcpb.CheckAndMutateRequest{Row: row, Predicate: oracleSel,
					IfTrue: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}, IfFalse: []*rpcpb.Mutation{put}})
				return err
			},
			"MutateRows": func() error {
				_, err := conn.Storage.MutateRows(ctx, &rpcpb.MutateRowsRequest{Rows: []*rpcpb.RowMutation{
					{Row: []byte("ok"), Mutations: []*rpcpb.Mutation{put}}, {Row: row, Mutations: []*rpcpb.Mutation{put}}}})
				return err
			},
			"Increment": func() error {
				_, err := conn.Storage.Increment(ctx, &rpcpb.IncrementRequest{Row: row, Family: []byte("c"), Qualifier: []byte("n"), Delta: 1, Nonce: nonce})
				return err
			},
			"ReadRows": func() error {
				_, err := conn.Storage.ReadRows(ctx, &rpcpb.ReadRowsRequest{Reads: []*rpcpb.ReadRowRequest{
					{Row: []byte("ok"), Filter: oracleSel}, {Row: row, Filter: oracleSel}}})
				return err
			},
			"CheckAndMutateRows": func() error {
				_, err := conn.Storage.CheckAndMutateRows(ctx, &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{
					{Row: []byte("ok"), IfFalse: []*rpcpb.Mutation{put}},
					{Row: row, Predicate: oracleSel, IfTrue: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}, IfFalse: []*rpcpb.Mutation{put}}}})
				return err
			},
			"CommitOnePhase": func() error {
				_, err := conn.Storage.CommitOnePhase(ctx, &rpcpb.CommitOnePhaseRequest{Row: row, Stamped: []*rpcpb.Mutation{put}})
				return err
			},
			"PrewriteAsync": func() error {
				stamped := &rpcpb.Mutation{Kind: rpcpb.MutationKind_PUT, Family: put.Family, Qualifier: put.Qualifier, Ts: 9, Value: make([]byte, 8)}
				_, err := conn.Storage.PrewriteAsync(ctx, &rpcpb.PrewriteAsyncRequest{Checks: []*rpcpb.AsyncCheck{
					{Row: []byte("ok"), Stamped: []*rpcpb.Mutation{stamped}}, {Row: row, Stamped: []*rpcpb.Mutation{stamped}}}})
				return err
			},
			"CheckAndMutateInEpoch check": func() error {
				_, err := conn.Storage.CheckAndMutateInEpoch(ctx, &rpcpb.CheckAndMutateInEpochRequest{Epoch: epoch(t, conn),
					Check: &rpcpb.RowCheck{Row: row, Predicate: oracleSel, IfTrue: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}, IfFalse: []*rpcpb.Mutation{put}}})
				return err
			},
			"CheckAndMutateInEpoch then": func() error {
				_, err := conn.Storage.CheckAndMutateInEpoch(ctx, &rpcpb.CheckAndMutateInEpochRequest{Epoch: epoch(t, conn),
					Check: &rpcpb.RowCheck{Row: []byte("ok"), Predicate: []*rpcpb.Selector{{Family: []byte("c"), AllQualifiers: true}}},
					Then:  []*rpcpb.RowMutation{{Row: row, Mutations: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}}}}})
				return err
			},
		}
	}
	seq := uint64(1)
	for _, row := range reservedRows() {
		for name, call := range calls(row, seq) {
			seq++
			err := call()
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s of %s: %v, want PermissionDenied", name, storage.QuoteRow(row), err)
			}
		}
	}
	settle(t, srv)
	unchanged(t, srv, conn, before, last)
	if after := leaseRecord(t, srv); after != mark {
		t.Errorf("the oracle's lease cell changed: %s, was %s", after, mark)
	}
	health, err := grpc_health_v1.NewHealthClient(rawConn(t, srv.Addr)).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil || health.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Errorf("health after the refused calls: %v %v", health, err)
	}
}

// epoch is the server's current epoch, as a prewrite call's reply says it.
func epoch(t *testing.T, conn *rpc.Conn) uint64 {
	t.Helper()
	resp, err := conn.Storage.CheckAndMutateRows(ctx, &rpcpb.CheckAndMutateRowsRequest{Checks: []*rpcpb.RowCheck{{Row: []byte("epoch probe")}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Epoch
}

// leaseRecord describes the oracle's lease cell (its owner and mark; its
// epoch moves with renewals).
func leaseRecord(t *testing.T, srv *servertest.Server) string {
	t.Helper()
	r, err := srv.Store().ReadRow(ctx, oracle.StoreMarkRow(), storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true, Limit: 1}})
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("the oracle's lease cell: %v %v", r.Cells, err)
	}
	info, err := oracle.DescribeLease(r.Cells[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("owner %s mark %d", info.Owner, info.Mark)
}

// TestReservedRowsThroughClient: the remote store reports a refused call
// as storage.ErrReserved (and ErrInvalidArgument: nothing changed); a scan
// of the whole keyspace never returns a reserved row; and deleting the row
// where stores used to keep the mark ("mark") is an ordinary client write
// that the oracle does not notice, across a restart too.
func TestReservedRowsThroughClient(t *testing.T) {
	dir := t.TempDir()
	srv := servertest.Start(t, server.Options{Dir: dir}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	st := servertest.Store(t, conn, remote.Options{})
	for _, row := range reservedRows() {
		err := st.Mutate(ctx, row, storage.Mutation{Kind: storage.DeleteRow})
		if !errors.Is(err, storage.ErrReserved) || !errors.Is(err, storage.ErrInvalidArgument) {
			t.Errorf("DeleteRow of %s: %v, want ErrReserved", storage.QuoteRow(row), err)
		}
	}
	var seen []string
	err := st.Scan(ctx, nil, nil, storage.Filter{{Family: oracle.FamilyOracle, AllQualifiers: true}}, 0, func(r storage.Row) bool {
		seen = append(seen, string(r.Key))
		return true
	})
	if err != nil || len(seen) != 0 {
		t.Errorf("a whole-keyspace scan of the oracle's family: %q %v, want no rows", seen, err)
	}
	if err := st.Mutate(ctx, []byte("mark"), storage.Mutation{Kind: storage.DeleteRow}); err != nil {
		t.Fatal(err)
	}
	last := allocate(t, conn)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	srv = servertest.Start(t, server.Options{Dir: dir}, "")
	conn = servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	if next := allocate(t, conn); next <= last {
		t.Fatalf("after a restart the oracle handed out %d, not above %d", next, last)
	}
}
