package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestDiskReserveFlag: an embedded store keeps its disk reserve file by
// default, and none with --disk-reserve -1 (which removes one kept
// before); a reserve that is not a
// number is a usage error.
func TestDiskReserveFlag(t *testing.T) {
	create := func() string {
		dir := filepath.Join(t.TempDir(), "db")
		db, err := percolator.Open(context.Background(), percolator.Options{Dir: dir, DisableGC: true, DiskReserve: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	reserve := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "store", "percolator-reserve"))
		return err == nil
	}
	dir := create()
	if reserve(dir) {
		t.Fatal("a reserve file with DiskReserve -1")
	}
	mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "10ms", "-q")
	if !reserve(dir) {
		t.Fatal("no reserve file with the default --disk-reserve")
	}
	mustRun(t, 0, "gc", "--dir", dir, "--gc-lifetime", "10ms", "-q", "--disk-reserve", "-1")
	if reserve(dir) {
		t.Fatal("the reserve file stays once --disk-reserve is -1")
	}
	none := create()
	mustRun(t, 0, "gc", "--dir", none, "--gc-lifetime", "10ms", "-q", "--disk-reserve", "-1")
	if reserve(none) {
		t.Fatal("a reserve file with --disk-reserve -1")
	}
	mustRun(t, 2, "gc", "--dir", none, "--disk-reserve", "lots")
}
