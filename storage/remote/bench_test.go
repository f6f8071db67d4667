package remote_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// BenchmarkSecondaryCommitBatch measures what a nonce costs a MutateRows
// over a server: batches shaped as the protocol's secondary commits (16
// rows, each a commit record put and a lock erased), sent by 8 callers per
// core, through plain MutateRows (a nonce: its request hashed and a record
// written, then dropped, in the server's table) and through
// MutateRowsIdempotent (none), side by side in one run against one server.
// The server's disk is in memory, so the syncs that a real disk spends
// most of a write on do not hide what the nonce costs in CPU.
func BenchmarkSecondaryCommitBatch(b *testing.B) {
	for _, mode := range []struct {
		name string
		send func(*remote.Store) func(context.Context, []storage.RowMutation) ([]error, error)
	}{
		{"nonce", func(st *remote.Store) func(context.Context, []storage.RowMutation) ([]error, error) {
			return st.MutateRows
		}},
		{"idempotent", func(st *remote.Store) func(context.Context, []storage.RowMutation) ([]error, error) {
			return st.MutateRowsIdempotent
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			// A fresh server each: the two modes write into stores of the
			// same size.
			srv := servertest.Start(b, server.Options{FS: vfs.NewMem(), Dir: "/db"}, "")
			send := mode.send(servertest.Store(b, servertest.Dial(b, srv.Addr, rpc.DialOptions{}), remote.Options{}))
			var next atomic.Uint64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := send(context.Background(), secondaryBatch(next.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkSecondaryCommitBatchAlternating is the same comparison made
// fair on a loaded machine: every caller alternates the two modes on one
// server, so both meet the same load, and the time of each call is summed
// per mode (ns/batch-nonce, ns/batch-idempotent; nonce/idempotent is
// their ratio).
func BenchmarkSecondaryCommitBatchAlternating(b *testing.B) {
	srv := servertest.Start(b, server.Options{FS: vfs.NewMem(), Dir: "/db"}, "")
	st := servertest.Store(b, servertest.Dial(b, srv.Addr, rpc.DialOptions{}), remote.Options{})
	var next atomic.Uint64
	var spent [2]atomic.Int64 // nanoseconds: nonce, idempotent
	var calls [2]atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			mode, send := n%2, st.MutateRows
			if mode == 1 {
				send = st.MutateRowsIdempotent
			}
			start := time.Now()
			if _, err := send(context.Background(), secondaryBatch(n)); err != nil {
				b.Error(err)
				return
			}
			spent[mode].Add(int64(time.Since(start)))
			calls[mode].Add(1)
		}
	})
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		return
	}
	nonce := float64(spent[0].Load()) / float64(calls[0].Load())
	idem := float64(spent[1].Load()) / float64(calls[1].Load())
	b.ReportMetric(nonce, "ns/batch-nonce")
	b.ReportMetric(idem, "ns/batch-idempotent")
	b.ReportMetric(nonce/idem, "nonce/idempotent")
}

// secondaryBatch is the n-th batch of 16 secondary commits: per row a
// commit record put at commit_ts and the lock erased at start_ts.
func secondaryBatch(n uint64) []storage.RowMutation {
	rows := make([]storage.RowMutation, 16)
	for i := range rows {
		rows[i] = storage.RowMutation{
			Row: fmt.Appendf(nil, "row%08d.%02d", n, i),
			Mutations: []storage.Mutation{
				storage.SetCell("write", "c", 2*n+1, binary.BigEndian.AppendUint64([]byte{1, 1, 0}, 2*n)),
				storage.DeleteCell("lock", "c", 2*n),
			},
		}
	}
	return rows
}
