package main

import (
	"context"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestServeRepliesCarryRegistryVersion: serve's oracle replies carry the
// observer registry version, read after allocating (the server is given
// the registry's reader; it reads no registry of its own): 0 before any
// registration, then a higher one after.
func TestServeRepliesCarryRegistryVersion(t *testing.T) {
	ctx := context.Background()
	addr := freeAddr(t)
	serveProc(t, t.TempDir(), addr)
	version := func() uint64 {
		t.Helper()
		resp, err := allocateReply(addr)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ObserversVersion == nil {
			t.Fatal("serve's oracle reply carries no registry version")
		}
		return *resp.ObserversVersion
	}
	if v := version(); v != 0 {
		t.Fatalf("nothing registered: version %d; want 0", v)
	}
	db, err := percolator.Open(ctx, percolator.Options{Server: addr, Logger: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	noop := func(context.Context, *percolator.Txn, string, string) error { return nil }
	if err := db.Observe(ctx, percolator.Observer{Name: "o", Column: "c", Fn: noop}); err != nil {
		t.Fatal(err)
	}
	if v := version(); v == 0 {
		t.Fatal("after a registration: version 0; want the raised one")
	}
}
