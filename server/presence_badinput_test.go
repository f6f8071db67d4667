package server_test

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// TestReadRowBadInputEveryFamily: a malformed ReadRow is refused with
// InvalidArgument whatever family it names. The server answers selectors
// of the lock family from its in-memory index (presence.go) and used to
// drop the ones that select nothing before the store saw them, so a
// malformed read of the lock family got OK and no cells; it must be
// refused exactly as the store refuses it (storage.CheckRead), alone or
// beside a well-formed selector, on a row that holds a lock and on one
// that does not. The data family "c" is the control.
func TestReadRowBadInputEveryFamily(t *testing.T) {
	srv := servertest.Start(t, server.Options{}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	st := servertest.Store(t, conn, remote.Options{})
	for _, fam := range []string{txn.FamilyLock, "c"} {
		if err := st.Mutate(ctx, []byte("locked"), storage.SetCell(fam, "x", 5, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, srv)
	before, last := snapshot(t, srv), allocate(t, conn)

	long := bytes.Repeat([]byte("k"), storage.MaxRowKeySize+1)
	for _, fam := range []string{txn.FamilyLock, "c"} {
		f := []byte(fam)
		good := &rpcpb.Selector{Family: []byte("c"), AllQualifiers: true}
		for _, tc := range []struct {
			name string
			rows [][]byte
			sel  *rpcpb.Selector
			msg  string
		}{
			{"row over the size limit", [][]byte{long}, &rpcpb.Selector{Family: f, AllQualifiers: true}, "row key"},
			{"inverted time range", nil, &rpcpb.Selector{Family: f, Qualifier: []byte("x"), Time: &rpcpb.TimeRange{Start: 9, End: 3}}, "time range"},
			{"Qualifier and AllQualifiers", nil, &rpcpb.Selector{Family: f, Qualifier: []byte("x"), AllQualifiers: true}, "both Qualifier and AllQualifiers"},
			{"qualifier over the size limit", nil, &rpcpb.Selector{Family: f, Qualifier: bytes.Repeat([]byte("q"), storage.MaxQualifierSize+1)}, "qualifier"},
		} {
			rows := tc.rows
			if rows == nil {
				rows = [][]byte{[]byte("r"), []byte("locked")}
			}
			for _, row := range rows {
				for _, filter := range [][]*rpcpb.Selector{{tc.sel}, {tc.sel, good}, {good, tc.sel}} {
					name := fmt.Sprintf("%s: %s, row %.10q, %d selectors", fam, tc.name, row, len(filter))
					resp, err := conn.Storage.ReadRow(ctx, &rpcpb.ReadRowRequest{Row: row, Filter: filter})
					wantCode(t, name, err, codes.InvalidArgument, tc.msg)
					if len(resp.GetCells()) > 0 {
						t.Errorf("%s: cells returned beside the refusal: %v", name, resp.GetCells())
					}
				}
			}
		}
	}
	settle(t, srv)
	unchanged(t, srv, conn, before, last)
}
