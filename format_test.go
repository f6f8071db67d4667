package percolator_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// TestOpenNewerFormat: a store a newer percolator wrote (its recorded
// format above FormatVersion) is refused by Open, embedded and by a
// server, with an error naming both versions; nothing is changed.
func TestOpenNewerFormat(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if v := db.FormatVersion(); v != percolator.FormatVersion {
		t.Fatalf("a new store is format %d, want %d", v, percolator.FormatVersion)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	newer := uint64(percolator.FormatVersion + 1)
	setFormat(t, dir, newer)

	for _, mustExist := range []bool{false, true} {
		_, err := percolator.Open(ctx, percolator.Options{Dir: dir, MustExist: mustExist})
		if !errors.Is(err, percolator.ErrFormat) {
			t.Fatalf("Open of a newer store: %v; want ErrFormat", err)
		}
		for _, want := range []string{"percolator: ", fmt.Sprintf("format %d", newer), fmt.Sprintf("format %d", percolator.FormatVersion), "nothing was changed"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %q", err, want)
			}
		}
	}
	if _, err := server.Open(ctx, server.Options{Dir: dir}); !errors.Is(err, txn.ErrFormat) {
		t.Fatalf("a server on a newer store: %v; want ErrFormat", err)
	}
	if v := readFormat(t, dir); v != newer {
		t.Fatalf("the refused store's format became %d", v)
	}
}

func setFormat(t *testing.T, dir string, v uint64) {
	t.Helper()
	st, err := pebble.Open(filepath.Join(dir, "store"), pebble.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := txn.RecordFormat(context.Background(), st, v); err != nil {
		t.Fatal(err)
	}
}

func readFormat(t *testing.T, dir string) uint64 {
	t.Helper()
	st, err := pebble.Open(filepath.Join(dir, "store"), pebble.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, _, err := txn.ReadFormat(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUpgrade: a store of the previous format is refused by Open (naming
// `percolator upgrade`) and by a server, changing nothing; Upgrade refuses
// while another process holds the directory, and a server target; after
// it, the store opens, and a second Upgrade changes nothing.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r", "c", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	setFormat(t, dir, percolator.FormatVersion-1)
	if _, err := percolator.Open(ctx, percolator.Options{Dir: dir}); !errors.Is(err, percolator.ErrFormat) || !strings.Contains(err.Error(), "percolator upgrade") {
		t.Fatalf("Open of an older store: %v", err)
	}
	if _, err := server.Open(ctx, server.Options{Dir: dir}); !errors.Is(err, txn.ErrFormat) {
		t.Fatalf("a server on an older store: %v; want ErrFormat", err)
	}
	if v := readFormat(t, dir); v != percolator.FormatVersion-1 {
		t.Fatalf("the refused store's format became %d", v)
	}
	if _, err := percolator.Upgrade(ctx, percolator.Options{Server: "127.0.0.1:1"}); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("Upgrade of a server: %v", err)
	}
	if _, err := percolator.Upgrade(ctx, percolator.Options{Dir: filepath.Join(dir, "nothing")}); err == nil {
		t.Fatal("Upgrade of a missing directory succeeded")
	}
	held, err := pebble.Open(filepath.Join(dir, "store"), pebble.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := percolator.Upgrade(ctx, percolator.Options{Dir: dir}); !errors.Is(err, percolator.ErrInUse) {
		t.Fatalf("Upgrade while another process holds the store: %v; want ErrInUse", err)
	}
	_ = held.Close()
	for want := uint64(percolator.FormatVersion - 1); ; want = percolator.FormatVersion {
		from, err := percolator.Upgrade(ctx, percolator.Options{Dir: dir})
		if err != nil || from != want {
			t.Fatalf("Upgrade: from %d, %v; want from %d", from, err, want)
		}
		if want == percolator.FormatVersion {
			break
		}
	}
	db, err = percolator.Open(ctx, percolator.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(ctx, func(tx *percolator.Txn) error {
		v, err := tx.Get(ctx, "r", "c")
		if err == nil && string(v) != "v" {
			err = fmt.Errorf("read %q", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
