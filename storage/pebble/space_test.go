package pebble

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble/faultfs"
)

// fillUntilRefused writes new 16 KiB versions of a few rows until the
// store refuses one, and returns the refusal (nil if none within max).
func fillUntilRefused(t *testing.T, s *Store, max int) error {
	t.Helper()
	v := make([]byte, 16<<10)
	for i := range max {
		_, _ = rand.Read(v) // incompressible
		row := []byte(fmt.Sprintf("r%02d", i%16))
		if err := s.Mutate(context.Background(), row, storage.SetCell("f", "q", uint64(i+1), v)); err != nil {
			return err
		}
	}
	return nil
}

// freeAll deletes every row the fill wrote, with the reserve's licence,
// and compacts, so the files holding them go.
func freeAll(t *testing.T, s *Store) {
	t.Helper()
	ctx := storage.WithReserve(context.Background())
	for i := range 16 {
		if err := s.Mutate(ctx, []byte(fmt.Sprintf("r%02d", i)), storage.Mutation{Kind: storage.DeleteRow}); err != nil {
			t.Fatalf("a delete with the reserve's licence: %v", err)
		}
	}
	if err := s.CompactFamily(ctx, "f"); err != nil {
		t.Fatal(err)
	}
}

// TestDiskReserve: on a disk that fills up (a filesystem with a quota
// that fails writes with ENOSPC), the store refuses writes with
// ErrNoSpace before the disk is full, never failing; it gives up its
// reserve, so writes marked WithReserve (the garbage collector's) still
// work; once they freed space, writes are accepted again and the reserve
// is taken back. The same holds when another process fills the disk
// between two readings of its free space: the write that meets ENOSPC
// frees the reserve and is retried.
func TestDiskReserve(t *testing.T) {
	const reserve = 2 << 20
	for _, c := range []struct {
		name  string
		every time.Duration // how often the store reads the free space
		fill  bool          // another process fills the disk at once
	}{
		{"filled by the store's writes", 0, false},
		{"filled by another process", time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := faultfs.NewQuota(vfs.NewMem(), 48<<20)
			s, err := Open("db", Options{FS: q, DiskReserve: reserve, MemTableSize: 256 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := q.Stat(q.PathJoin("db", reserveName)); err != nil {
				t.Fatalf("no reserve file after Open: %v", err)
			}
			s.space.every = c.every
			s.space.next.Store(time.Now().Add(c.every).UnixNano())
			var filled int64
			if c.fill {
				if err := fillUntilRefused(t, s, 20); err != nil {
					t.Fatal(err)
				}
				du, _ := q.GetDiskUsage("db")
				filled = int64(du.AvailBytes) - 1000
				q.Fill(filled) // the disk is all but full now
			}
			err = fillUntilRefused(t, s, 10_000)
			if !errors.Is(err, storage.ErrNoSpace) {
				t.Fatalf("filling the disk: %v; want ErrNoSpace", err)
			}
			t.Logf("refused: %v", err)
			if !s.LowOnSpace() {
				t.Fatal("LowOnSpace is false after a refusal")
			}
			if _, err := q.Stat(q.PathJoin("db", reserveName)); err == nil {
				t.Fatal("the reserve file is still there while writes are refused")
			}
			if err := s.Mutate(context.Background(), []byte("other"), storage.SetCell("f", "q", 1, nil)); !errors.Is(err, storage.ErrNoSpace) {
				t.Fatalf("a plain write while low: %v; want ErrNoSpace", err)
			}
			if c.fill {
				q.Fill(-filled) // the other process's files go
			}
			before := q.Used()
			freeAll(t, s)
			t.Logf("freed %d of %d bytes", before-q.Used(), before)
			s.space.every = 0
			s.space.next.Store(0)
			if err := s.Mutate(context.Background(), []byte("after"), storage.SetCell("f", "q", 1, []byte("x"))); err != nil {
				t.Fatalf("a write once space was freed: %v", err)
			}
			if _, err := q.Stat(q.PathJoin("db", reserveName)); err != nil {
				t.Fatalf("the reserve was not taken back: %v", err)
			}
			row, err := s.ReadRow(context.Background(), []byte("after"), storage.Filter{{Family: "f", AllQualifiers: true}})
			if err != nil || len(row.Cells) != 1 {
				t.Fatalf("reading the write back: %v, %v", row, err)
			}
		})
	}
}
