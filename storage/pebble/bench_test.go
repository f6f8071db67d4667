package pebble

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

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

// BenchmarkReadRowShapes reads rows shaped as the protocol's, from the
// memtable and from sstables: "snapshot" is a transaction's read of a
// column (a lock and the write records below start_ts, of which the row
// holds 4), "predicate" is a prewrite's predicate (a lock on either side
// of start_ts, a write record at or above it, the row's GC fence: three
// families, none holding a match). Both go through readRow's iterator,
// not the exact-cell Get.
func BenchmarkReadRowShapes(b *testing.B) {
	const ts = 1000
	shapes := []struct {
		name   string
		filter storage.Filter
		cells  int
	}{
		{"snapshot", storage.Filter{
			{Family: "lock", Qualifier: "c", Time: storage.Before(ts)},
			{Family: "write", Qualifier: "c", Time: storage.Before(ts), Limit: 8},
		}, 4},
		{"predicate", storage.Filter{
			{Family: "lock", Qualifier: "c", Time: storage.Before(ts)},
			{Family: "lock", Qualifier: "c", Time: storage.From(ts + 1)},
			{Family: "write", Qualifier: "c", Time: storage.From(ts)},
			{Family: "gcfence", Qualifier: "f", Time: storage.From(ts)},
		}, 0},
	}
	for _, flushed := range []bool{false, true} {
		s := openShapes(b, flushed)
		where := "memtable"
		if flushed {
			where = "sstables"
		}
		for _, sh := range shapes {
			b.Run(where+"/"+sh.name, func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					r, err := s.ReadRow(ctx, benchRow(i*7919), sh.filter)
					if err != nil || len(r.Cells) != sh.cells {
						b.Fatalf("%v %v", r, err)
					}
				}
			})
		}
	}
}

// openShapes opens a store on an in-memory disk holding benchRows rows
// of committed versions of column c (data and write records at 4
// timestamps), and a lock and data of column d every 16th row.
func openShapes(b *testing.B, flushed bool) *Store {
	b.Helper()
	s, err := Open("/db", Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	value := make([]byte, 16)
	var rows []storage.RowMutation
	for i := range benchRows {
		var ms []storage.Mutation
		for v := uint64(1); v <= 4; v++ {
			ms = append(ms, storage.SetCell("data", "c", 100*v, value),
				storage.SetCell("write", "c", 100*v+1, binary.BigEndian.AppendUint64([]byte{1}, 100*v)))
		}
		if i%16 == 0 {
			ms = append(ms, storage.SetCell("lock", "d", 2000, value), storage.SetCell("data", "d", 2000, value))
		}
		rows = append(rows, storage.RowMutation{Row: benchRow(i), Mutations: ms})
		// Small batches: a large one would be kept as a flushable batch,
		// not in the memtable's skiplist.
		if len(rows) == 100 || i == benchRows-1 {
			if _, err := s.MutateRows(ctx, rows); err != nil {
				b.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if flushed {
		if err := s.db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkCheckAndMutateRowsPrewrite is a large transaction's batched
// prewrite: one CheckAndMutateRows call of 200 rows, each checked with
// the prewrite's predicate (BenchmarkReadRowShapes' "predicate", matching
// nothing) and writing a lock and data, answered before its log sync
// (deferred), on sstables. ns/op is per call; "µs/row" per checked row.
func BenchmarkCheckAndMutateRowsPrewrite(b *testing.B) {
	const rows = 200
	s := openShapes(b, true)
	value := make([]byte, 16)
	ts := uint64(3000)
	b.ReportAllocs()
	start := 0
	for b.Loop() {
		ts += 10
		// A column of its own each time the rows come round again: no
		// earlier call's lock is in the way.
		col := fmt.Sprintf("e%d", start/benchRows)
		checks := make([]storage.RowCheck, rows)
		for i := range checks {
			checks[i] = storage.RowCheck{
				Row: benchRow((start + i) * 7919),
				Predicate: storage.Filter{
					{Family: "lock", Qualifier: col, Time: storage.Before(ts)},
					{Family: "lock", Qualifier: col, Time: storage.From(ts + 1)},
					{Family: "write", Qualifier: col, Time: storage.From(ts)},
					{Family: "gcfence", Qualifier: "f", Time: storage.From(ts)},
				},
				IfFalse: []storage.Mutation{storage.SetCell("lock", col, ts, value), storage.SetCell("data", col, ts, value)},
			}
		}
		start += rows
		matched, err := s.CheckAndMutateRows(ctx, checks, true)
		if err != nil || len(matched) != rows || matched[0] {
			b.Fatalf("%v %v", matched, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "µs/row")
}
