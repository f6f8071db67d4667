package percolator_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/proccpu"
)

// BenchmarkUpdateSingleCell: durable single-cell write transactions from
// 64 goroutines (32 per core on two)... the figure `percolator bench`
// compares with raw Pebble is printed there; this one is for profiling,
// and reports the process's CPU per transaction (cpu-µs/op: the
// commits' goroutines, pebble's log writer and compactions, the
// collector), which at this concurrency bounds the rate more than the
// log syncs do.
func BenchmarkUpdateSingleCell(b *testing.B) {
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 100)
	b.SetParallelism(32)
	before := proccpu.Used()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			row := string(binary.BigEndian.AppendUint64([]byte("key/"), rng.Uint64()))
			if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set(row, "v", value) }); err != nil {
				b.Error(err)
			}
		}
	})
	if cpu := proccpu.Used() - before; before > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N)/float64(time.Microsecond), "cpu-µs/op")
	}
}

// BenchmarkViewPointReads: read-only transactions of 100 point reads.
func BenchmarkViewPointReads(b *testing.B) {
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const keys = 10000
	key := func(i int) string { return string(binary.BigEndian.AppendUint64([]byte("key/"), uint64(i))) }
	for i := 0; i < keys; i += 500 {
		_ = db.Update(ctx, func(tx *percolator.Txn) error {
			for j := i; j < i+500; j++ {
				_ = tx.Set(key(j), "v", make([]byte, 100))
			}
			return nil
		})
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		for pb.Next() {
			_ = db.View(ctx, func(tx *percolator.Txn) error {
				for range 100 {
					if _, err := tx.Get(ctx, key(rng.IntN(keys)), "v"); err != nil {
						b.Error(err)
					}
				}
				return nil
			})
		}
	})
}
