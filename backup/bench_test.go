package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// benchCells is the size of the benchmarks' store: 10,000 rows of 10
// columns of 100-byte values.
const benchRows, benchCols, benchValue = 10_000, 10, 100

// benchStore fills an embedded store on disk with benchRows × benchCols
// cells.
func benchStore(b *testing.B) *percolator.DB {
	b.Helper()
	db := open(b, percolator.Options{Dir: b.TempDir()})
	v := bytes.Repeat([]byte("v"), benchValue)
	err := db.Load(context.Background(), benchRows/100, percolator.LoadOptions{}, func(tx *percolator.Txn, item int) error {
		for r := item * 100; r < (item+1)*100; r++ {
			for c := range benchCols {
				if err := tx.Set(fmt.Sprintf("row%08d", r), fmt.Sprintf("col%02d", c), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkWrite: a backup of 100,000 cells of an embedded store on disk.
func BenchmarkWrite(b *testing.B) {
	db := benchStore(b)
	var s Summary
	for b.Loop() {
		var err error
		if s, err = Write(context.Background(), db, io.Discard, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	report(b, s)
}

// BenchmarkRestore: a restore of 100,000 cells into a fresh embedded
// store on disk.
func BenchmarkRestore(b *testing.B) {
	var buf bytes.Buffer
	s, err := Write(context.Background(), benchStore(b), &buf, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		db := open(b, percolator.Options{Dir: b.TempDir()})
		b.StartTimer()
		if s, err = Restore(context.Background(), db, bytes.NewReader(buf.Bytes()), RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	report(b, s)
}

func report(b *testing.B, s Summary) {
	secs := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(s.Cells)/secs, "cells/s")
	b.ReportMetric(float64(s.Bytes)/secs/(1<<20), "MiB/s")
}
