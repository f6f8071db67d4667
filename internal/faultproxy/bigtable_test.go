package faultproxy

import (
	"context"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
)

// In front of the Bigtable emulator: a read through a blackhole times
// out, once it is lifted it returns the write made before, and after a
// cut the client reconnects by itself.
func TestBigtableEmulatorThroughProxy(t *testing.T) {
	emu := bttesting.Start(t)
	p := newProxy(t, emu.Addr())
	opts := bttesting.Options(t, emu, "proxied")
	opts.Emulator = p.Addr()
	if err := bigtable.Init(patient(t), opts); err != nil {
		t.Fatal(err)
	}
	s, err := bigtable.Open(patient(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	row, filter := []byte("r"), storage.Filter{{Family: "f", AllQualifiers: true}}
	if err := s.Mutate(patient(t), row, storage.SetCell("f", "c", 1, []byte("v"))); err != nil {
		t.Fatal(err)
	}
	expectRow := func(what string) {
		t.Helper()
		r, err := s.ReadRow(patient(t), row, filter)
		if err != nil || len(r.Cells) != 1 || string(r.Cells[0].Value) != "v" {
			t.Fatalf("%s: ReadRow = %+v, %v; want the cell written", what, r, err)
		}
	}

	// Every connection, not the first listed: the admin client Init used
	// may still be listed, closing, beside the data client's.
	waitConns(t, p, 1)
	p.SetBlackhole(true)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.ReadRow(ctx, row, filter); !isDeadline(err) {
		t.Fatalf("ReadRow through a blackhole: %v, want a deadline error", err)
	}
	p.SetBlackhole(false)
	expectRow("after Resume")
	p.Cut()
	expectRow("after a cut")
}
