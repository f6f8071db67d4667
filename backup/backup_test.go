package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/leakcheck"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/txn"
)

// open opens a DB, closed when the test ends.
func open(t testing.TB, opts percolator.Options) *percolator.DB {
	t.Helper()
	db, err := percolator.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// openOn opens a DB on a memory store of the test's, for the test to reach
// the store beneath it (the safe point's row).
func openOn(t testing.TB) (*percolator.DB, storage.Store) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	return open(t, percolator.Options{Store: st}), st
}

func update(t testing.TB, db *percolator.DB, fn func(tx *percolator.Txn) error) {
	t.Helper()
	if err := db.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// fill writes rows × cols cells with values of several sizes (empty,
// inline, and past the inline size, so kept in the data column), rows of
// any bytes (NUL, 0xFF), then overwrites and deletes some: what the
// snapshot holds is what contents lists. It reads nothing (no read of
// the safe point either, which the DB would then cache).
func fill(t testing.TB, db *percolator.DB, rows, cols int) {
	t.Helper()
	big := strings.Repeat("v", 5000)
	for r := range rows {
		update(t, db, func(tx *percolator.Txn) error {
			for c := range cols {
				row, col := rowName(r), fmt.Sprintf("c%02d", c)
				v := fmt.Sprintf("%d.%d", r, c)
				switch {
				case c == 0 && r%5 == 0:
					v = ""
				case c == 1 && r%7 == 0:
					v = big + v
				}
				if err := tx.Set(row, col, []byte(v)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	update(t, db, func(tx *percolator.Txn) error {
		for r := 0; r < rows; r += 3 {
			if err := tx.Delete(rowName(r), "c00"); err != nil {
				return err
			}
			if err := tx.Set(rowName(r), "c01", []byte("new")); err != nil {
				return err
			}
		}
		return nil
	})
}

// rowName is row r's key: binary bytes, NUL and 0xFF included, in the
// order of r.
func rowName(r int) string { return fmt.Sprintf("r\x00%04d\xff", r) }

// contents lists every user cell of db's snapshot and its observers.
func contents(t testing.TB, db *percolator.DB) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	obs, err := db.Observers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range obs {
		out = append(out, fmt.Sprintf("observer %s on %s weak=%v", o.Name, o.Column, o.Weak))
	}
	tx, err := db.BeginReadOnly(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for start := ""; ; {
		cells, next, err := tx.ScanRows(ctx, start, "", 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			out = append(out, fmt.Sprintf("%q/%s=%q", c.Row, c.Column, c.Value))
		}
		if next == "" {
			return out
		}
		start = next
	}
}

func sameContents(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: %d entries, want %d\ngot  %.400q\nwant %.400q", what, len(got), len(want), got, want)
	}
}

// observe registers a strong observer with code and a weak one without.
func observe(t testing.TB, db *percolator.DB) {
	t.Helper()
	ctx := context.Background()
	noop := func(context.Context, *percolator.Txn, string, string) error { return nil }
	if err := db.Observe(ctx, percolator.Observer{Name: "strong", Column: "c02", Fn: noop}); err != nil {
		t.Fatal(err)
	}
	if err := db.Observe(ctx, percolator.Observer{Name: "weak", Column: "signal", Weak: true}); err != nil {
		t.Fatal(err)
	}
}

// backupTo writes db's backup to a buffer.
func backupTo(t testing.TB, db *percolator.DB, o Options) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	s, err := Write(context.Background(), db, &buf, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), s
}

// TestRoundTrip: a backup in small pages holds the snapshot's cells
// (values of every size, binary rows; no deletion) and observers, its
// summary says what the file holds, and a restore reproduces them on the
// embedded store, in memory and on disk, every restored cell of an
// observed column notified.
func TestRoundTrip(t *testing.T) {
	for _, backend := range []string{"memory", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			var src, dst percolator.Options
			if backend == "pebble" {
				src.Dir, dst.Dir = t.TempDir(), t.TempDir()
			}
			db := open(t, src)
			fill(t, db, 60, 6)
			observe(t, db)
			want := contents(t, db)
			file, s := backupTo(t, db, Options{PageCells: 7, PageBytes: 100})
			if s.Cells != int64(len(want)-2) || s.Observers != 2 || s.Bytes != int64(len(file)) || s.StartTS == 0 {
				t.Fatalf("summary %+v for %d cells and a file of %d bytes", s, len(want)-2, len(file))
			}
			v, err := Verify(bytes.NewReader(file), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v.Checksum != s.Checksum || v.Cells != s.Cells || v.StartTS != s.StartTS || !v.Time.Equal(s.Time) || v.Bytes != s.Bytes {
				t.Fatalf("Verify = %+v, Write = %+v", v, s)
			}
			to := open(t, dst)
			r, err := Restore(ctx, to, bytes.NewReader(file), RestoreOptions{BatchCells: 10})
			if err != nil {
				t.Fatal(err)
			}
			if r.Checksum != s.Checksum || r.Cells != s.Cells || r.Observers != 2 {
				t.Fatalf("Restore = %+v, Write = %+v", r, s)
			}
			sameContents(t, "restored", contents(t, to), want)
			pending, err := to.PendingNotifications(ctx, 0)
			if err != nil || len(pending) != 60 {
				t.Fatalf("%d notifications pending (%v), want one per restored cell of the observed column c02: 60", len(pending), err)
			}
		})
	}
}

// TestRestoreRefusesCorrupt: a file cut anywhere, with any one byte
// changed, or with bytes after its trailer, is refused (ErrCorrupt; a
// changed version: ErrVersion) and the database stays empty.
func TestRestoreRefusesCorrupt(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	fill(t, db, 3, 2)
	observe(t, db)
	file, _ := backupTo(t, db, Options{})
	to := open(t, percolator.Options{})
	refused := func(what string, b []byte, versionByte bool) {
		t.Helper()
		_, err := Restore(ctx, to, bytes.NewReader(b), RestoreOptions{})
		if !errors.Is(err, ErrCorrupt) && !(versionByte && errors.Is(err, ErrVersion)) {
			t.Fatalf("%s: %v, want ErrCorrupt", what, err)
		}
		if _, verr := Verify(bytes.NewReader(b), ReadOptions{}); !errors.Is(verr, ErrCorrupt) && !errors.Is(verr, ErrVersion) {
			t.Fatalf("%s: Verify: %v", what, verr)
		}
	}
	for n := range len(file) {
		refused(fmt.Sprintf("cut at %d of %d", n, len(file)), file[:n], false)
	}
	for i := range file {
		b := bytes.Clone(file)
		b[i] ^= 0x20
		refused(fmt.Sprintf("byte %d changed", i), b, i >= len(magic) && i < len(magic)+4)
	}
	refused("a byte after the trailer", append(bytes.Clone(file), 0), false)
	if got := contents(t, to); len(got) != 0 {
		t.Fatalf("a refused file left %v", got)
	}
	var ce *CorruptError
	if _, err := Verify(bytes.NewReader(file[:len(file)-1]), ReadOptions{}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("a truncated file: %v", err)
	}
}

// TestRestoreRefusesNonEmpty: a database with a cell or an observer is
// refused with ErrNotEmpty, unchanged; one whose cells were all deleted
// takes the restore.
func TestRestoreRefusesNonEmpty(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	fill(t, db, 4, 2)
	want := contents(t, db)
	file, _ := backupTo(t, db, Options{})

	withCell := open(t, percolator.Options{})
	update(t, withCell, func(tx *percolator.Txn) error { return tx.Set("x", "y", []byte("z")) })
	before := contents(t, withCell)
	if _, err := Restore(ctx, withCell, bytes.NewReader(file), RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("into a database with a cell: %v", err)
	}
	sameContents(t, "after a refused restore", contents(t, withCell), before)

	withObserver := open(t, percolator.Options{})
	if err := withObserver.Observe(ctx, percolator.Observer{Name: "o", Column: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, withObserver, bytes.NewReader(file), RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("into a database with an observer: %v", err)
	}
	if got := contents(t, withObserver); len(got) != 1 {
		t.Fatalf("after a refused restore: %v", got)
	}

	deleted := open(t, percolator.Options{})
	update(t, deleted, func(tx *percolator.Txn) error { return tx.Set("x", "y", []byte("z")) })
	update(t, deleted, func(tx *percolator.Txn) error { return tx.Delete("x", "y") })
	if _, err := Restore(ctx, deleted, bytes.NewReader(file), RestoreOptions{}); err != nil {
		t.Fatalf("into a database of deletions: %v", err)
	}
	sameContents(t, "restored over deletions", contents(t, deleted), want)
}

// TestRestoreChecksBeforeWriting: a file the database cannot take whole
// (a value over its MaxValueSize, far in the file) is refused before any
// cell is written; the database's transaction limits split the load into
// transactions of at most MaxTxnWrites cells.
func TestRestoreChecksBeforeWriting(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	fill(t, db, 40, 3)
	want := contents(t, db)
	update(t, db, func(tx *percolator.Txn) error { return tx.Set("zz", "big", bytes.Repeat([]byte("b"), 3000)) })
	file, _ := backupTo(t, db, Options{})
	small := open(t, percolator.Options{MaxValueSize: 2048})
	if _, err := Restore(ctx, small, bytes.NewReader(file), RestoreOptions{}); !errors.Is(err, percolator.ErrInvalidArgument) {
		t.Fatalf("a value over MaxValueSize: %v", err)
	}
	if got := contents(t, small); len(got) != 0 {
		t.Fatalf("a refused restore wrote %d cells", len(got))
	}

	limited := open(t, percolator.Options{MaxTxnWrites: 10})
	if _, err := Restore(ctx, limited, bytes.NewReader(file), RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "restored in small transactions", contents(t, limited), append(want, `"zz"/big="`+strings.Repeat("b", 3000)+`"`))
	if n := limited.Stats().Commits; n < uint64(len(want)+1)/10 {
		t.Fatalf("%d commits for %d cells at 10 a transaction", n, len(want)+1)
	}
}

// TestWriteBelowSafePoint: a backup whose snapshot the safe point passed
// midway (its registration lost) fails with ErrSnapshotTooOld, and
// WriteFile leaves no file, not even a temporary one; what Write had
// written (the header, the observers and two pages) is no backup to a
// Reader.
func TestWriteBelowSafePoint(t *testing.T) {
	ctx := context.Background()
	for _, viaFile := range []bool{false, true} {
		db, st := openOn(t)
		fill(t, db, 10, 2)
		observe(t, db)
		o := Options{PageCells: 3, beforePage: func(page int, startTS uint64) {
			if page == 2 {
				// Midway, the collector passes the backup's snapshot (its
				// registration lost), and the cached safe point ages out.
				if _, err := txn.AdvanceSafePoint(ctx, st, startTS+1); err != nil {
					t.Error(err)
				}
				time.Sleep(txn.SafePointCache + 10*time.Millisecond)
			}
		}}
		if !viaFile {
			var buf bytes.Buffer
			_, err := Write(ctx, db, &buf, o)
			if !errors.Is(err, percolator.ErrSnapshotTooOld) {
				t.Fatalf("Write below the safe point: %v", err)
			}
			if buf.Len() == 0 {
				t.Fatal("nothing written before the first page: the test tests no torn file")
			}
			if _, err := Verify(&buf, ReadOptions{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("what a failed Write wrote: %v, want ErrCorrupt", err)
			}
			continue
		}
		dir := t.TempDir()
		_, err := WriteFile(ctx, db, filepath.Join(dir, "b.pcb"), o)
		if !errors.Is(err, percolator.ErrSnapshotTooOld) {
			t.Fatalf("WriteFile below the safe point: %v", err)
		}
		noFiles(t, dir)
	}
}

// TestWriteFailsMidway: a backup that fails after pages were written (its
// context cancelled) leaves no file through WriteFile, and a prefix
// without trailer through Write.
func TestWriteFailsMidway(t *testing.T) {
	db := open(t, percolator.Options{})
	fill(t, db, 30, 2)
	for _, viaFile := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		o := Options{PageCells: 4, beforePage: func(page int, _ uint64) {
			if page == 3 {
				cancel()
			}
		}}
		dir := t.TempDir()
		var buf bytes.Buffer
		var err error
		if viaFile {
			_, err = WriteFile(ctx, db, filepath.Join(dir, "b.pcb"), o)
		} else {
			_, err = Write(ctx, db, &buf, o)
		}
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled backup: %v", err)
		}
		noFiles(t, dir)
		if !viaFile {
			if buf.Len() <= headerSize {
				t.Fatalf("%d bytes written before the failure: the test tests no torn file", buf.Len())
			}
			if _, err := Verify(&buf, ReadOptions{}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("what a failed Write wrote: %v, want ErrCorrupt", err)
			}
		}
	}
}

// TestWriteFile: the file is complete where it appears; an existing file
// is left as it was unless Overwrite.
func TestWriteFile(t *testing.T) {
	ctx := context.Background()
	db := open(t, percolator.Options{})
	fill(t, db, 5, 2)
	want := contents(t, db)
	dir := t.TempDir()
	path := filepath.Join(dir, "b.pcb")
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFile(ctx, db, path, Options{}); !errors.Is(err, ErrExists) {
		t.Fatalf("over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Fatalf("the existing file became %q", b)
	}
	s, err := WriteFile(ctx, db, path, Options{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, err := Verify(f, ReadOptions{}); err != nil || v.Checksum != s.Checksum {
		t.Fatalf("the file: %+v, %v", v, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want the backup alone", len(entries))
	}
	to := open(t, percolator.Options{})
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, to, f, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "restored from the file", contents(t, to), want)
	missing := filepath.Join(dir, "nope", "b.pcb")
	if _, err := WriteFile(ctx, db, missing, Options{}); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "cannot create "+missing+":") {
		t.Fatalf("into a missing directory: %v (the message names the file asked for)", err)
	}
}

// noFiles fails the test if dir holds anything.
func noFiles(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a failed backup left %s", e.Name())
	}
}

// TestRestoreInterrupted: a load cut short (its context cancelled after a
// first transaction) returns the context's error with none of its
// goroutines left, and the cells it committed stay: the store is not
// empty to a second restore, which refuses it.
func TestRestoreInterrupted(t *testing.T) {
	db := open(t, percolator.Options{})
	fill(t, db, 50, 4)
	total := len(contents(t, db))
	file, _ := backupTo(t, db, Options{})
	to := open(t, percolator.Options{})
	noLeak := leakcheck.Check(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Restore(ctx, to, bytes.NewReader(file), RestoreOptions{BatchCells: 10, Concurrency: 2, Progress: func(p Progress) {
		if p.Phase == "load" && p.Cells > 0 { // after the first transaction, not at the phase's start
			cancel()
		}
	}})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted restore: %v", err)
	}
	noLeak()
	if n := len(contents(t, to)); n == 0 || n >= total {
		t.Fatalf("an interrupted restore left %d cells of %d", n, total)
	}
	if _, err := Restore(context.Background(), to, bytes.NewReader(file), RestoreOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a restore into what an interrupted one left: %v", err)
	}
}
