package server_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage"
)

// TestSyncDelayOption: the store's group-commit wait is the server's to
// set; a wait above the store's bound is refused at Open, which then
// creates nothing, and one within it opens.
func TestSyncDelayOption(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	if _, err := server.Open(ctx, server.Options{FS: fs, Dir: "/db", SyncDelay: time.Second, Logger: slog.New(slog.DiscardHandler)}); !errors.Is(err, storage.ErrInvalidArgument) {
		t.Fatalf("Open with a 1 s sync delay: %v; want ErrInvalidArgument", err)
	}
	if names, _ := fs.List("/db/store"); len(names) != 0 {
		t.Fatalf("the refused Open left %v in the store's directory", names)
	}
	for _, d := range []time.Duration{-1, 0, time.Millisecond} {
		srv, err := server.Open(ctx, server.Options{FS: fs, Dir: "/db", SyncDelay: d, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("Open with a sync delay of %v: %v", d, err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
