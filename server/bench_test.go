package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// BenchmarkMutateRowsNonce measures what a nonce costs the server's
// MutateRows, without the network: batches shaped as the protocol's
// secondary commits (16 rows, each a commit record put and a lock erased),
// with a nonce (the request hashed, a record written in the batch and
// dropped when the client's mark passes it) and without, on a store whose
// disk is in memory (no sync hides the CPU). "nonce" and "idempotent" send
// one mode each (their allocations are exact; their times move with the
// machine's load); "alternating" alternates them call by call, so both
// meet the same load, and sums each call's time per mode
// (ns/batch-nonce, ns/batch-idempotent, and their ratio).
func BenchmarkMutateRowsNonce(b *testing.B) {
	for _, name := range []string{"nonce", "idempotent", "alternating"} {
		b.Run(name, func(b *testing.B) {
			svc, group := benchService(b)
			var spent [2]time.Duration
			var calls [2]int
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				n := uint64(i + 1)
				mode := 1 // idempotent
				if name == "nonce" || (name == "alternating" && i%2 == 0) {
					mode = 0
				}
				req := secondaryRequest(n)
				if mode == 0 {
					req.Nonce = &rpcpb.Nonce{Group: group, Seq: n, LowWater: n}
				}
				start := time.Now()
				if _, err := svc.MutateRows(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				spent[mode] += time.Since(start)
				calls[mode]++
			}
			if calls[0] == 0 || calls[1] == 0 {
				return
			}
			nonce := float64(spent[0]) / float64(calls[0])
			idem := float64(spent[1]) / float64(calls[1])
			b.ReportMetric(nonce, "ns/batch-nonce")
			b.ReportMetric(idem, "ns/batch-idempotent")
			b.ReportMetric(nonce/idem, "nonce/idempotent")
		})
	}
}

// benchService is a server on an in-memory disk, its storage service, and
// a registered nonce group.
func benchService(b *testing.B) (*storageService, []byte) {
	ctx := context.Background()
	srv, err := Open(ctx, Options{FS: vfs.NewMem(), Dir: "/db"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Kill)
	svc := &storageService{srv: srv}
	group := make([]byte, GroupLen)
	group[0] = 1
	if _, err := svc.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: group}); err != nil {
		b.Fatal(err)
	}
	return svc, group
}

// secondaryRequest is the n-th batch of 16 secondary commits.
func secondaryRequest(n uint64) *rpcpb.MutateRowsRequest {
	req := &rpcpb.MutateRowsRequest{}
	for r := range 16 {
		req.Rows = append(req.Rows, &rpcpb.RowMutation{Row: fmt.Appendf(nil, "row%08d.%02d", n, r), Mutations: rpc.MutationsToPB([]storage.Mutation{
			storage.SetCell("write", "c", 2*n+1, []byte{1, 1, 0, byte(n)}),
			storage.DeleteCell("lock", "c", 2*n),
		})})
	}
	return req
}
