package docindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
)

// countingFiles wraps each file's Read to count the reads.
func countingFiles(files []File, reads *atomic.Int64) []File {
	out := make([]File, len(files))
	for i, f := range files {
		read := f.Read
		f.Read = func() ([]byte, error) { reads.Add(1); return read() }
		out[i] = f
	}
	return out
}

// writeTree writes files under dir with a modification time an hour ago
// (so that no file is racy).
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(full, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func scanDir(t *testing.T, dir string) ([]File, []BadFile) {
	t.Helper()
	files, bad, err := ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files, bad
}

// syncDir syncs dir into db, counting the files read.
func syncDir(t *testing.T, db *percolator.DB, dir string, opts SyncOptions) (SyncStats, int64) {
	t.Helper()
	files, bad := scanDir(t, dir)
	var reads atomic.Int64
	st, err := Sync(context.Background(), db, countingFiles(files, &reads), bad, opts)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, db, 2)
	return st, reads.Load()
}

// TestSyncSkipsByStat: a rerun reads only the files whose size,
// modification time or inode changed, a file edited to the
// same size is still found, Rehash reads everything, and a file modified
// just before a sync is read again by the next (racy).
func TestSyncSkipsByStat(t *testing.T) {
	src := t.TempDir()
	corpus := map[string]string{}
	for i := range 30 {
		corpus[fmt.Sprintf("d%d/f%02d.html", i%3, i)] = fmt.Sprintf("<title>file %d</title> word%d", i, i)
	}
	writeTree(t, src, corpus)
	db := openIndex(t, t.TempDir())
	defer db.Close()
	step := func(name string, opts SyncOptions, wantReads int64, wantChanged int) {
		t.Helper()
		st, reads := syncDir(t, db, src, opts)
		if reads != wantReads || st.Changed+st.New != wantChanged {
			t.Fatalf("%s: %d files read, %+v; want %d read, %d new or changed", name, reads, st, wantReads, wantChanged)
		}
		m, err := ReadCorpus(src)
		if err != nil {
			t.Fatal(err)
		}
		checkEqualsBatch(t, db, m, name)
	}
	step("first sync", SyncOptions{}, 30, 30)
	step("no change", SyncOptions{}, 0, 0)
	// Same size, new bytes, an hour-old mtime that differs from the stored one.
	p := filepath.Join(src, "d1", "f04.html")
	writeTree(t, src, map[string]string{"d1/f04.html": "<title>file X</title> wordX"})
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(p, past, past); err != nil {
		t.Fatal(err)
	}
	step("one edit", SyncOptions{}, 1, 1)
	step("rehash", SyncOptions{Rehash: true}, 30, 0)
	if err := os.WriteFile(p, []byte("<title>file Y</title> wordY"), 0o644); err != nil { // mtime now: racy
		t.Fatal(err)
	}
	step("racy edit", SyncOptions{}, 1, 1)
	step("after a racy edit", SyncOptions{}, 1, 0)
}

// TestSyncBadFiles: a file that cannot be read, one over the size limit
// (one at it is taken), a vanished one and a path one past the limit are
// skipped and reported
// with a reason, the rest indexed; a bad file that was indexed before
// keeps its indexed content, and the index equals a batch build of the
// Reference (one bad file used to stop the whole run).
func TestSyncBadFiles(t *testing.T) {
	src := t.TempDir()
	good := map[string]string{"a.html": "<title>a</title> alpha", "b.txt": "beta\n", "sub/c.md": "gamma", "big.html": "small at first"}
	writeTree(t, src, good)
	db := openIndex(t, t.TempDir())
	defer db.Close()
	ctx := context.Background()
	if st, _ := syncDir(t, db, src, SyncOptions{}); st.New != 4 || len(st.Bad) != 0 {
		t.Fatalf("first sync: %+v", st)
	}
	writeTree(t, src, map[string]string{"big.html": strings.Repeat("x", 101), "new.html": "<title>new</title> delta", "vanishes.txt": "soon gone",
		"limit.txt": strings.Repeat("y", 100)})
	files, bad := scanDir(t, src)
	if err := os.Remove(filepath.Join(src, "vanishes.txt")); err != nil {
		t.Fatal(err)
	}
	errRead := errors.New("input/output error")
	files = append(files,
		File{Path: "unreadable.html", Read: func() ([]byte, error) { return nil, errRead }},
		File{Path: strings.Repeat("l", MaxPathSize-len(".txt")+1) + ".txt", Read: func() ([]byte, error) { return []byte("long"), nil }},
	)
	st, err := Sync(ctx, db, files, bad, SyncOptions{MaxFileSize: 100})
	if err != nil {
		t.Fatalf("sync with bad files: %v", err)
	}
	wantBad := map[string]string{"big.html": "exceeds the limit of 100 bytes", "vanishes.txt": "no such file", "unreadable.html": "input/output error", files[len(files)-1].Path: "exceeds the limit of"}
	if len(st.Bad) != len(wantBad) || st.New != 2 || st.Unchanged != 3 {
		t.Errorf("stats %+v; want 2 new (one at the size limit), 3 unchanged and %d bad", st, len(wantBad))
	}
	for _, b := range st.Bad {
		if !strings.Contains(b.Reason, wantBad[b.Path]) {
			t.Errorf("bad file %.40q: reason %q, want %q", b.Path, b.Reason, wantBad[b.Path])
		}
	}
	drain(t, db, 2)
	ref, unread, err := Reference(ctx, db, files, st.Bad)
	if err != nil {
		t.Fatal(err)
	}
	if string(ref["big.html"]) != "small at first" || ref["new.html"] == nil || len(unread) != 0 {
		t.Fatalf("reference: big.html %q, new.html %q, unread %v", ref["big.html"], ref["new.html"], unread)
	}
	checkEqualsBatch(t, db, ref, "after bad files")
	checkNoQuarantine(t, db)
}

// TestSyncBadDirKeepsItsDocs: the documents under a directory that could
// not be listed are kept, not deleted.
func TestSyncBadDirKeepsItsDocs(t *testing.T) {
	db := openIndex(t, t.TempDir())
	defer db.Close()
	files := map[string][]byte{"a.html": []byte("a"), "sub/b.html": []byte("b"), "sub/deep/c.html": []byte("c"), "subway.html": []byte("s")}
	syncMap(t, db, files)
	st, err := Sync(context.Background(), db, MemFiles(map[string][]byte{"a.html": []byte("a"), "subway.html": []byte("s")}),
		[]BadFile{{Path: "sub/", Reason: "permission denied"}}, SyncOptions{})
	if err != nil || st.Deleted != 0 || st.Unchanged != 2 {
		t.Fatalf("%+v, %v; want nothing deleted", st, err)
	}
	drain(t, db, 1)
	checkEqualsBatch(t, db, files, "after an unreadable directory")
}

// TestSyncRefusesMassDelete: a sync that would delete more than half of
// the indexed documents (an empty or wrong source directory) changes
// nothing and fails with ErrTooManyDeletes, unless allowed;
// deleting half is allowed.
func TestSyncRefusesMassDelete(t *testing.T) {
	db := openIndex(t, t.TempDir())
	defer db.Close()
	ctx := context.Background()
	files := map[string][]byte{}
	for i := range 10 {
		files[fmt.Sprintf("f%d.txt", i)] = []byte(fmt.Sprintf("file %d", i))
	}
	syncMap(t, db, files)
	half := map[string][]byte{}
	for i := range 5 {
		half[fmt.Sprintf("f%d.txt", i)] = files[fmt.Sprintf("f%d.txt", i)]
	}
	fewer := map[string][]byte{"f0.txt": files["f0.txt"], "f1.txt": files["f1.txt"], "f2.txt": files["f2.txt"], "f3.txt": files["f3.txt"]}
	for _, src := range []map[string][]byte{nil, fewer} {
		st, err := Sync(ctx, db, MemFiles(src), nil, SyncOptions{})
		if !errors.Is(err, ErrTooManyDeletes) {
			t.Fatalf("sync of %d files over 10: %+v, %v; want ErrTooManyDeletes", len(src), st, err)
		}
		drain(t, db, 1)
		checkEqualsBatch(t, db, files, "after a refused sync")
	}
	if st, err := Sync(ctx, db, MemFiles(half), nil, SyncOptions{}); err != nil || st.Deleted != 5 {
		t.Fatalf("deleting half: %+v, %v", st, err)
	}
	drain(t, db, 1)
	if st, err := Sync(ctx, db, nil, nil, SyncOptions{AllowDeletes: true}); err != nil || st.Deleted != 5 {
		t.Fatalf("deleting all, allowed: %+v, %v", st, err)
	}
	drain(t, db, 1)
	checkEqualsBatch(t, db, nil, "after deleting all")
}

// TestScanDirNames: ScanDir lists files whose names are not UTF-8 (and
// reads them), skips hidden names and symbolic links, and reports a
// directory it cannot read as a bad "dir/" entry.
func TestScanDirNames(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"caf\xe9.html": "latin-1 name", "\xff\xfe/x.txt": "ff dir", ".hidden/y.html": "no", "ok.md": "ok"})
	if err := os.Symlink("ok.md", filepath.Join(src, "link.md")); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(src, "locked")
	writeTree(t, src, map[string]string{"locked/z.html": "z"})
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	files, bad := scanDir(t, src)
	m, unread := ReadFiles(files)
	want := map[string]string{"caf\xe9.html": "latin-1 name", "\xff\xfe/x.txt": "ff dir", "ok.md": "ok"}
	if _, err := os.ReadDir(locked); err == nil { // root reads it anyway
		want["locked/z.html"] = "z"
	} else if len(bad) != 1 || bad[0].Path != "locked/" {
		t.Errorf("bad = %q; want locked/", bad)
	}
	if len(m) != len(want) || len(unread) != 0 {
		t.Errorf("read %q (unread %q); want %q", m, unread, want)
	}
	for p, c := range want {
		if string(m[p]) != c {
			t.Errorf("%q: %q, want %q", p, m[p], c)
		}
	}
}
