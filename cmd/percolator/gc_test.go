package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage/pebble"
	"github.com/seed-992972ee/percolator/txn"
)

// TestGCCommand: gc --dry-run counts what gc then removes, changing
// nothing; status shows the safe point; a zero or negative lifetime is a
// usage error. upgrade moves a store of the previous format to this
// build's (which status then prints), says so once done, and refuses a
// server.
func TestGCCommand(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, DisableGC: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2", "3"} {
		if err := db.Update(ctx, func(tx *percolator.Txn) error { return tx.Set("r", "v", []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var dry, real struct {
		DryRun   bool `json:"dry_run"`
		Versions int  `json:"versions_removed"`
		Rows     int  `json:"rows_visited"`
	}
	out, _ := mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "20ms", "--dry-run", "--json")
	if err := json.Unmarshal([]byte(out), &dry); err != nil || !dry.DryRun || dry.Versions != 2 || dry.Rows != 1 {
		t.Fatalf("gc --dry-run: %+v, %v\n%s", dry, err, out)
	}
	out, _ = mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "20ms")
	if !strings.Contains(out, "removed 2 versions") {
		t.Fatalf("gc: %s", out)
	}
	out, _ = mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "20ms", "--json")
	if err := json.Unmarshal([]byte(out), &real); err != nil || real.Versions != 0 {
		t.Fatalf("a second gc: %+v, %v\n%s", real, err, out)
	}
	if out, _ = mustRun(t, 0, "status", "--dir", dir); !strings.Contains(out, "garbage collection: safe point") || !strings.Contains(out, "store format: 2") {
		t.Fatalf("status:\n%s", out)
	}
	mustRun(t, 2, "gc", "--dir", dir, "--gc-lifetime", "0")
	mustRun(t, 2, "gc", "--dir", dir, "--gc-lifetime", "-1s")

	st, err := pebble.Open(filepath.Join(dir, "store"), pebble.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	err = txn.RecordFormat(ctx, st, txn.FormatVersion-1)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut := mustRun(t, 1, "status", "--dir", dir); !strings.Contains(errOut, "percolator upgrade") {
		t.Fatalf("status of an older store: %s", errOut)
	}
	if out, _ = mustRun(t, 0, "upgrade", "--dir", dir); !strings.Contains(out, "upgraded the store from format 1 to 2") {
		t.Fatalf("upgrade: %s", out)
	}
	if out, _ = mustRun(t, 0, "upgrade", "--dir", dir); !strings.Contains(out, "already") {
		t.Fatalf("a second upgrade: %s", out)
	}
	mustRun(t, 2, "upgrade", "--server", "127.0.0.1:1")
	if out, _ = mustRun(t, 0, "status", "--dir", dir); !strings.Contains(out, "store format: 2") {
		t.Fatalf("status after the upgrade:\n%s", out)
	}
}
