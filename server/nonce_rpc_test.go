package server_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
)

// The nonce table through the RPC, as a client that numbers its own calls
// sees it.

type nonceClient struct {
	t     *testing.T
	srv   *servertest.Server
	conn  *rpc.Conn
	group []byte
}

func newNonceClient(t *testing.T) *nonceClient {
	srv := servertest.Start(t, server.Options{}, "")
	c := &nonceClient{t: t, srv: srv, conn: servertest.Dial(t, srv.Addr, rpc.DialOptions{}), group: bytes.Repeat([]byte{9}, server.GroupLen)}
	if _, err := c.conn.Storage.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: c.group}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *nonceClient) incr(group []byte, seq, low uint64, delta int64) (*rpcpb.IncrementResponse, error) {
	return c.conn.Storage.Increment(ctx, &rpcpb.IncrementRequest{
		Row: []byte("ctr"), Family: []byte("c"), Qualifier: []byte("n"), Delta: delta,
		Nonce: &rpcpb.Nonce{Group: group, Seq: seq, LowWater: low},
	})
}

func (c *nonceClient) mustIncr(seq, low uint64, delta, want int64, replayed bool) {
	c.t.Helper()
	resp, err := c.incr(c.group, seq, low, delta)
	if err != nil || resp.Value != want || resp.Replayed != replayed {
		c.t.Fatalf("Increment seq %d: %v, %v; want %d, replayed %v", seq, resp, err, want, replayed)
	}
}

func (c *nonceClient) counter() int64 {
	c.t.Helper()
	r, err := c.srv.Store().ReadRow(ctx, []byte("ctr"), storage.Filter{{Family: "c", Qualifier: "n"}})
	if err != nil || len(r.Cells) != 1 {
		c.t.Fatalf("counter: %v, %v", r.Cells, err)
	}
	return int64(binary.BigEndian.Uint64(r.Cells[0].Value))
}

// A number reused with another body, a group never opened, and a number
// below the group's mark are refused, and apply nothing; the refusals are
// not answers from the table (the number's own call still replays).
func TestNonceRefusalsOverRPC(t *testing.T) {
	c := newNonceClient(t)
	c.mustIncr(1, 1, 1, 1, false)
	c.mustIncr(1, 1, 1, 1, true)

	_, err := c.incr(c.group, 1, 1, 2)
	wantCode(t, "seq 1 with another delta", err, codes.InvalidArgument, "nonce reused")
	_, err = c.conn.Storage.Mutate(ctx, &rpcpb.MutateRequest{Row: []byte("ctr"),
		Mutations: []*rpcpb.Mutation{{Kind: rpcpb.MutationKind_DELETE_ROW}},
		Nonce:     &rpcpb.Nonce{Group: c.group, Seq: 1, LowWater: 1}})
	wantCode(t, "seq 1 with another method", err, codes.InvalidArgument, "nonce reused")
	// Bodies that encode to the same bytes, of two methods.
	if _, err := c.conn.Storage.Mutate(ctx, &rpcpb.MutateRequest{Row: []byte("x"), Nonce: &rpcpb.Nonce{Group: c.group, Seq: 2, LowWater: 1}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.conn.Storage.CheckAndMutate(ctx, &rpcpb.CheckAndMutateRequest{Row: []byte("x"), Nonce: &rpcpb.Nonce{Group: c.group, Seq: 2, LowWater: 1}})
	wantCode(t, "seq 2 of a Mutate sent as a CheckAndMutate of the same bytes", err, codes.InvalidArgument, "nonce reused")
	_, err = c.incr(bytes.Repeat([]byte{8}, server.GroupLen), 1, 1, 100)
	wantCode(t, "a group never opened", err, codes.FailedPrecondition, rpc.MsgUnknownGroup)

	c.mustIncr(5, 5, 10, 11, false) // raises the mark to 5
	_, err = c.incr(c.group, 3, 3, 100)
	wantCode(t, "seq 3 below the mark 5", err, codes.FailedPrecondition, rpc.MsgBelowMark)
	_, err = c.incr(c.group, 1, 1, 100)
	wantCode(t, "seq 1, answered before, below the mark 5", err, codes.FailedPrecondition, rpc.MsgBelowMark)

	if n := c.counter(); n != 11 {
		t.Fatalf("counter %d after the refusals, want 11", n)
	}
	c.mustIncr(5, 5, 10, 11, true)
}

// The records of calls below a raised mark are dropped: the table's size
// (percolator_nonce_table_calls) shrinks, and so do the records in the
// store once flushed.
func TestNonceTableShrinksOverRPC(t *testing.T) {
	c := newNonceClient(t)
	records := func() int {
		n := 0
		if err := c.srv.Store().ScanRecords(ctx, []byte{'n'}, func(_, _ []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for seq := uint64(1); seq <= 20; seq++ {
		c.mustIncr(seq, 1, 1, int64(seq), false)
	}
	if n, r := metric(t, c.srv, "percolator_nonce_table_calls"), records(); n != 20 || r != 20 {
		t.Fatalf("%v calls held, %d records; want 20", n, r)
	}
	c.mustIncr(21, 21, 1, 21, false)
	if n := metric(t, c.srv, "percolator_nonce_table_calls"); n != 1 {
		t.Fatalf("%v calls held after the mark rose to 21, want 1", n)
	}
	settle(t, c.srv)
	if r := records(); r != 1 {
		t.Fatalf("%d records after the flush, want 1", r)
	}
}
