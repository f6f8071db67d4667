package docindex

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Stat is what Sync compares to skip a file without reading it: if a
// file's size, modification time and inode are what they were when it was
// last loaded, its content is taken to be unchanged. The zero Stat is
// unknown: such a file is always read and compared by content.
type Stat struct {
	Size    int64
	ModTime int64 // nanoseconds since the Unix epoch
	Inode   uint64
}

// File is one file of a corpus as Sync sees it.
type File struct {
	// Path is the corpus path: relative, clean, slash-separated, any bytes
	// (a file name need not be UTF-8).
	Path string
	Stat Stat
	// Read returns the content. Sync calls it only for a file whose Stat
	// changed (or is unknown), and may call it more than once.
	Read func() ([]byte, error)
}

// BadFile is a file (or, with a Path ending in "/", a directory) that was
// skipped, and why. The index keeps what it held for it.
type BadFile struct {
	Path, Reason string
}

// ScanDir lists the corpus under dir without reading any file: every
// regular file whose path is Indexable, files and directories whose name
// starts with "." and symbolic links skipped, sorted by path. A directory
// it cannot read is returned as a bad file, and the rest listed; only an
// unreadable dir itself is an error. File names are kept as bytes: they
// need not be valid UTF-8.
func ScanDir(dir string) ([]File, []BadFile, error) {
	if _, err := os.ReadDir(dir); err != nil {
		return nil, nil, fmt.Errorf("docindex: reading corpus %s: %w", dir, err)
	}
	var files []File
	var bad []BadFile
	err := filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		rel := relPath(dir, full)
		switch {
		case err != nil && d != nil && d.IsDir():
			bad = append(bad, BadFile{Path: rel + "/", Reason: err.Error()})
			return fs.SkipDir
		case err != nil:
			bad = append(bad, BadFile{Path: rel, Reason: err.Error()})
			return nil
		case rel != "." && strings.HasPrefix(d.Name(), "."):
			return skip(d)
		case !d.Type().IsRegular() || !Indexable(rel):
			return nil
		}
		f, reason := statFile(full, rel, d)
		if reason != "" {
			bad = append(bad, BadFile{Path: rel, Reason: reason})
			return nil
		}
		files = append(files, f)
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, bad, err
}

func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return fs.SkipDir
	}
	return nil
}

// relPath is full's corpus path under dir.
func relPath(dir, full string) string {
	rel, err := filepath.Rel(dir, full)
	if err != nil {
		return filepath.ToSlash(full)
	}
	return filepath.ToSlash(rel)
}

func statFile(full, rel string, d fs.DirEntry) (File, string) {
	info, err := d.Info()
	if err != nil {
		return File{}, err.Error()
	}
	return File{Path: rel, Stat: statOf(info), Read: func() ([]byte, error) { return os.ReadFile(full) }}, ""
}

// MemFiles is the File list of an in-memory corpus (paths that are not
// Indexable left out), each with an unknown Stat, sorted by path.
func MemFiles(m map[string][]byte) []File {
	var files []File
	for p, c := range m {
		if Indexable(p) {
			files = append(files, File{Path: p, Read: func() ([]byte, error) { return c, nil }})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files
}

// ReadCorpus returns every indexable regular file under dir (ScanDir's
// list), keyed by its slash-separated path relative to dir. Files and
// directories whose name starts with "." are skipped, and so are symbolic
// links. The first file or directory it cannot read is an error.
func ReadCorpus(dir string) (map[string][]byte, error) {
	files, bad, err := ScanDir(dir)
	if err == nil && len(bad) > 0 {
		err = fmt.Errorf("docindex: reading corpus %s: %s: %s", dir, bad[0].Path, bad[0].Reason)
	}
	if err != nil {
		return nil, err
	}
	m, bad := ReadFiles(files)
	if len(bad) > 0 {
		return nil, fmt.Errorf("docindex: reading corpus %s: %s: %s", dir, bad[0].Path, bad[0].Reason)
	}
	return m, nil
}

// ReadFiles reads every file, returning the contents of those it could
// read and the others as bad files.
func ReadFiles(files []File) (map[string][]byte, []BadFile) {
	m := make(map[string][]byte, len(files))
	var bad []BadFile
	for _, f := range files {
		b, err := f.Read()
		if err != nil {
			bad = append(bad, BadFile{Path: f.Path, Reason: err.Error()})
			continue
		}
		m[f.Path] = b
	}
	return m, bad
}
