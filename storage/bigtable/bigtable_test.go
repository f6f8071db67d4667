package bigtable_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

var tables atomic.Int64

// TestConformance runs the storage conformance suite against the Bigtable
// emulator, one table per subtest.
func TestConformance(t *testing.T) {
	emu := bttesting.Start(t)
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return bttesting.Open(t, emu, fmt.Sprintf("t%d", tables.Add(1)))
	})
}

// TestInitIdempotent: init twice is fine; Open of a missing table is
// ErrNoTable.
func TestInitIdempotent(t *testing.T) {
	emu := bttesting.Start(t)
	ctx := context.Background()
	opts := bttesting.Options(t, emu, "x")
	if _, err := bigtable.Open(ctx, opts); err == nil || !errors.Is(err, bigtable.ErrNoTable) {
		t.Fatalf("Open before init: %v, want ErrNoTable", err)
	}
	for range 2 {
		if err := bigtable.Init(ctx, opts); err != nil {
			t.Fatal(err)
		}
	}
	s, err := bigtable.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
