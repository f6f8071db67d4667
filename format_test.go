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
