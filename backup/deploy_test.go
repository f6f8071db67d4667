package backup

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
)

// TestAcrossDeployments: a backup of an embedded store restores into a
// store on Bigtable (its emulator), whose backup restores into a server's
// store, whose backup restores into another embedded store: the same
// cells and observers at every step.
func TestAcrossDeployments(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := open(t, percolator.Options{Dir: t.TempDir()})
	fill(t, src, 30, 4)
	observe(t, src)
	want := contents(t, src)
	first := filepath.Join(dir, "embedded.pcb")
	if _, err := WriteFile(ctx, src, first, Options{PageCells: 10}); err != nil {
		t.Fatal(err)
	}

	emu := bttesting.Start(t)
	bt := open(t, percolator.Options{Store: bttesting.Open(t, emu, "restored")})
	restoreFile(t, bt, first)
	sameContents(t, "on Bigtable", contents(t, bt), want)
	second := filepath.Join(dir, "bigtable.pcb")
	if _, err := WriteFile(ctx, bt, second, Options{PageCells: 10}); err != nil {
		t.Fatal(err)
	}

	srv := servertest.Start(t, server.Options{}, "")
	remote := open(t, percolator.Options{Server: srv.Addr})
	restoreFile(t, remote, second)
	sameContents(t, "on a server", contents(t, remote), want)
	third := filepath.Join(dir, "server.pcb")
	if _, err := WriteFile(ctx, remote, third, Options{PageCells: 10}); err != nil {
		t.Fatal(err)
	}

	back := open(t, percolator.Options{Dir: t.TempDir()})
	restoreFile(t, back, third)
	sameContents(t, "back on an embedded store", contents(t, back), want)
}

// restoreFile restores the backup at path into db.
func restoreFile(t testing.TB, db *percolator.DB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Restore(context.Background(), db, f, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
}
