package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// BenchmarkRPC measures what one RPC costs in CPU, client and server
// together: a remote store (storage/remote, rpc.Conn) calls a server over
// a loopback TCP listener in this process, whose disk is in memory, so no
// sync hides the CPU. The calls are shaped as the protocol's (txn): a
// ReadRow is a snapshot read of a column (a lock and its write records
// below start_ts), a CheckAndMutate alternates a prewrite (lock and data
// put unless the row holds a conflicting lock, write or fence) and the
// commit of that prewrite (a write record put and the lock erased if the
// lock is there), each on a row of 64 per caller that grows a version per
// pair. Several callers per core keep the server busy, as a workload's
// workers do.
//
// cpu-ns/op is the process's user and system CPU time (getrusage) per
// call, which the machine's load moves less than wall time; ns/op and
// allocs/op are Go's usual figures (the allocations of both sides).
func BenchmarkRPC(b *testing.B) {
	b.Run("ReadRow", func(b *testing.B) {
		st := benchStore(b)
		rows := preload(b, st, 256)
		benchCalls(b, func(caller, i int) error {
			row := rows[(caller*31+i)%len(rows)]
			_, err := st.ReadRow(context.Background(), row, storage.Filter{
				{Family: txn.FamilyLock, Qualifier: "c", Time: storage.Before(1 << 40)},
				{Family: txn.FamilyWrite, Qualifier: "c", Time: storage.Before(1 << 40), Limit: 8},
			})
			return err
		})
	})
	b.Run("CheckAndMutate", func(b *testing.B) {
		st := benchStore(b)
		benchCalls(b, func(caller, i int) error {
			row := fmt.Appendf(nil, "cas%03d.%02d", caller, (i/2)%64)
			ts := uint64(1000 + 2*(i/128)) // a prewrite and its commit share start_ts
			pred, ifTrue, ifFalse, applied := casCall(i, ts)
			matched, err := st.CheckAndMutateIdempotent(context.Background(), row, pred, ifTrue, ifFalse)
			if err == nil && matched != applied {
				err = fmt.Errorf("call %d on %s at %d did not apply", i, row, ts)
			}
			return err
		})
	})
}

// casCall is the i-th call of a caller: a prewrite at start_ts ts when i
// is even (lock and data put unless the row holds a conflicting lock,
// write record or fence: the branch taken is ifFalse, so it applies when
// the predicate does not match), else its commit at ts+1 (applies when
// the lock matches).
func casCall(i int, ts uint64) (pred storage.Filter, ifTrue, ifFalse []storage.Mutation, applied bool) {
	if i%2 == 0 {
		pred = storage.Filter{
			{Family: txn.FamilyLock, Qualifier: "c", Time: storage.Before(ts)},
			{Family: txn.FamilyLock, Qualifier: "c", Time: storage.From(ts + 1)},
			{Family: txn.FamilyWrite, Qualifier: "c", Time: storage.From(ts)},
			{Family: txn.FamilyFence, Qualifier: "f", Time: storage.From(ts)},
		}
		return pred, nil, []storage.Mutation{
			storage.SetCell(txn.FamilyLock, "c", ts, []byte("lock-record-of-a-prewrite-about-fifty-bytes-long..")),
			storage.SetCell(txn.FamilyData, "c", ts, []byte("value-of-sixteen")),
		}, false
	}
	pred = storage.Filter{{Family: txn.FamilyLock, Qualifier: "c", Time: storage.At(ts)}}
	return pred, []storage.Mutation{
		storage.SetCell(txn.FamilyWrite, "c", ts+1, []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 3, 232}),
		storage.DeleteCell(txn.FamilyLock, "c", ts),
	}, nil, true
}

// benchStore is a remote store on a fresh in-process server whose disk
// is in memory.
func benchStore(b *testing.B) *remote.Store {
	b.Helper()
	srv := servertest.Start(b, server.Options{FS: vfs.NewMem(), Dir: "/db", DisableGC: true}, "")
	return servertest.Store(b, servertest.Dial(b, srv.Addr, rpc.DialOptions{}), remote.Options{})
}

// preload writes n committed rows of column "c", each with a few
// versions (data and write records), and returns their keys.
func preload(b *testing.B, st *remote.Store, n int) [][]byte {
	b.Helper()
	ctx := context.Background()
	rows := make([][]byte, n)
	for i := range rows {
		rows[i] = fmt.Appendf(nil, "acct%06d", i)
		var ms []storage.Mutation
		for v := uint64(1); v <= 4; v++ {
			ms = append(ms,
				storage.SetCell(txn.FamilyData, "c", 100*v, []byte("value-of-sixteen")),
				storage.SetCell(txn.FamilyWrite, "c", 100*v+1, []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, byte(v), 0}))
		}
		if err := st.Mutate(ctx, rows[i], ms...); err != nil {
			b.Fatal(err)
		}
	}
	return rows
}

// benchCalls runs call b.N times from 8 callers per core (caller is the
// caller's number, i counts its calls from 0) and reports cpu-ns/op.
func benchCalls(b *testing.B, call func(caller, i int) error) {
	b.Helper()
	var callers atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime(b)
	b.RunParallel(func(pb *testing.PB) {
		caller := int(callers.Add(1))
		for i := 0; pb.Next(); i++ {
			if err := call(caller, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
