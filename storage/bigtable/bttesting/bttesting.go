// Package bttesting runs the Bigtable emulator for tests and opens
// storage/bigtable stores on it.
package bttesting

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// Start starts an emulator, stopped when the test ends.
func Start(t testing.TB, interceptors ...grpc.UnaryServerInterceptor) *bigtable.Emulator {
	t.Helper()
	emu, err := bigtable.StartEmulator("127.0.0.1:0", interceptors...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	return emu
}

// Options returns the options of table on emu.
func Options(t testing.TB, emu *bigtable.Emulator, table string) bigtable.Options {
	t.Helper()
	return bigtable.Options{Project: "test", Instance: "test", Table: table, Emulator: emu.Addr()}
}

// Open creates table on emu and opens a store on it. The caller closes
// it (the conformance suite does); it is closed when the test ends
// otherwise.
func Open(t testing.TB, emu *bigtable.Emulator, table string) *bigtable.Store {
	t.Helper()
	ctx := context.Background()
	opts := Options(t, emu, table)
	if err := bigtable.Init(ctx, opts); err != nil {
		t.Fatal(err)
	}
	s, err := bigtable.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
