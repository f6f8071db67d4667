package pebble

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

const benchRows = 10000

func benchRow(i int) []byte { return []byte(fmt.Sprintf("user%08d", i%benchRows)) }

// openBench opens a store holding benchRows rows, each with versions of
// data:c at ts 10, 20, ..., 50, flushed so reads touch sstables.
func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	value := make([]byte, 100)
	var rows []storage.RowMutation
	for i := range benchRows {
		var ms []storage.Mutation
		for ts := uint64(10); ts <= 50; ts += 10 {
			ms = append(ms, storage.SetCell("data", "c", ts, value))
		}
		rows = append(rows, storage.RowMutation{Row: benchRow(i), Mutations: ms})
	}
	if _, err := s.MutateRows(ctx, rows); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkReadRowExactTS is the fast path: one cell at one timestamp.
func BenchmarkReadRowExactTS(b *testing.B) {
	s := openBench(b)
	f := storage.Filter{{Family: "data", Qualifier: "c", Time: storage.At(30)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r, err := s.ReadRow(ctx, benchRow(i*7919), f)
		if err != nil || len(r.Cells) != 1 {
			b.Fatalf("%v %v", r, err)
		}
	}
}

// BenchmarkRawGet is the floor for the fast path: pebble's own Get of the
// same key, value copied.
func BenchmarkRawGet(b *testing.B) {
	s := openBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		row := benchRow(i * 7919)
		key := make([]byte, 0, keyLen("data", row, "c"))
		v, closer, err := s.db.Get(appendKey(key, "data", row, "c", 30))
		if err != nil {
			b.Fatal(err)
		}
		_ = append([]byte(nil), v...)
		closer.Close()
	}
}

// BenchmarkReadRowLatestBefore is the general path as a snapshot read
// uses it: the newest version below a timestamp.
func BenchmarkReadRowLatestBefore(b *testing.B) {
	s := openBench(b)
	f := storage.Filter{{Family: "data", Qualifier: "c", Time: storage.Before(35), Limit: 1}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r, err := s.ReadRow(ctx, benchRow(i*7919), f)
		if err != nil || len(r.Cells) != 1 || r.Cells[0].TS != 30 {
			b.Fatalf("%v %v", r, err)
		}
	}
}

// BenchmarkCheckAndMutate is a prewrite-like conditional write: each call
// checks for a lock at one timestamp and writes one (a durable commit).
func BenchmarkCheckAndMutate(b *testing.B) {
	s := openBench(b)
	var ts atomic.Uint64
	value := make([]byte, 100)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			casBench(b, s, benchRow(i), ts.Add(1), value)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var n atomic.Int64
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				casBench(b, s, benchRow(int(n.Add(1))), ts.Add(1), value)
			}
		})
	})
}

func casBench(b *testing.B, s *Store, row []byte, ts uint64, value []byte) {
	pred := storage.Filter{{Family: "lock", Qualifier: "c", Time: storage.From(ts)}}
	lock := binary.BigEndian.AppendUint64(nil, ts)
	matched, err := s.CheckAndMutate(ctx, row, pred, nil, []storage.Mutation{
		storage.SetCell("lock", "c", ts, lock), storage.SetCell("data", "c", ts, value),
	})
	if err != nil || matched {
		b.Fatalf("CheckAndMutate: %v %v", matched, err)
	}
}
