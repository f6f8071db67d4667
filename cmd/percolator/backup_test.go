package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestBackupRestore: backup --out of a directory's database, and restore
// of the file into a new directory, which then holds the same values and
// observers; the summaries (--json) agree on the file; a second restore
// into it, a corrupt file, and an existing --out are refused and change
// nothing.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	src, dst, file := filepath.Join(work, "src"), filepath.Join(work, "dst"), filepath.Join(work, "b.pcb")
	want := map[string]string{"Bob/bal": "$3", "Joe/bal": "$9", "r\x00\xff/v": strings.Repeat("x", 5000)}
	db, err := percolator.Open(ctx, percolator.Options{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(ctx, func(tx *percolator.Txn) error {
		for k, v := range want {
			row, col, _ := strings.Cut(k, "/")
			if err := tx.Set(row, col, []byte(v)); err != nil {
				return err
			}
		}
		return tx.Set("gone", "v", []byte("1"))
	})
	if err == nil {
		err = db.Update(ctx, func(tx *percolator.Txn) error { return tx.Delete("gone", "v") })
	}
	if err == nil {
		err = db.Observe(ctx, percolator.Observer{Name: "audit", Column: "bal"})
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	out, _ := mustRun(t, 0, "backup", "--dir", src, "--out", file, "--json", "--quiet")
	var b, r struct {
		Cells, Observers int64
		SHA256           string
		ElapsedS         *float64 `json:"elapsed_s"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Cells != 3 || b.Observers != 1 || b.ElapsedS == nil {
		t.Fatalf("backup --json: %+v, %v\n%s", b, err, out)
	}
	out, _ = mustRun(t, 0, "restore", "--dir", dst, file, "--json", "--quiet")
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Cells != 3 || r.SHA256 != b.SHA256 {
		t.Fatalf("restore --json: %+v, %v\n%s", r, err, out)
	}

	_, errOut := mustRun(t, 1, "restore", "--dir", dst, file, "--quiet")
	if !strings.Contains(errOut, "percolator restore: the database is not empty") {
		t.Fatalf("a restore into a restored database: %s", errOut)
	}
	bad := filepath.Join(work, "bad.pcb")
	whole, _ := os.ReadFile(file)
	if err := os.WriteFile(bad, whole[:len(whole)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut = mustRun(t, 1, "restore", "--dir", filepath.Join(work, "never"), bad); !strings.Contains(errOut, "corrupt or truncated") {
		t.Fatalf("a truncated file: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(work, "never")); !os.IsNotExist(err) {
		t.Fatalf("a refused file created the directory: %v", err)
	}
	if _, errOut = mustRun(t, 1, "backup", "--dir", src, "--out", file); !strings.Contains(errOut, "--force") {
		t.Fatalf("over an existing file: %s", errOut)
	}

	db, err = percolator.Open(ctx, percolator.Options{Dir: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for k, v := range want {
		row, col, _ := strings.Cut(k, "/")
		if got := readCell(ctx, t, db, row, col); got != v {
			t.Errorf("restored %q = %.20q, want %.20q", k, got, v)
		}
	}
	if got := readCell(ctx, t, db, "gone", "v"); got != "" {
		t.Errorf("a deleted cell restored as %q", got)
	}
	if obs, err := db.Observers(ctx); err != nil || len(obs) != 1 || obs[0].Name != "audit" || obs[0].Column != "bal" {
		t.Errorf("restored observers %+v, %v", obs, err)
	}
}

// readCell reads (row, col) from db, "" when absent.
func readCell(ctx context.Context, t *testing.T, db *percolator.DB, row, col string) string {
	t.Helper()
	var v []byte
	err := db.View(ctx, func(tx *percolator.Txn) (err error) {
		v, err = tx.Get(ctx, row, col)
		return err
	})
	if err != nil && !errors.Is(err, percolator.ErrNotFound) {
		t.Fatal(err)
	}
	return string(v)
}
