package docindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
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

// ErrBadGlob: a Selection's glob is malformed (path.Match's syntax) or
// empty.
var ErrBadGlob = errors.New("docindex: bad glob")

// DefaultInclude are the globs of the files a Selection chooses when it
// has no Include: the Indexable ones. Unlike Include's globs, they match
// the extension in any case ("A.HTML" too).
func DefaultInclude() []string { return []string{"*.html", "*.htm", "*.txt", "*.md"} }

// Selection chooses the files of a source directory that the index holds
// (ListDir). The zero value chooses the Indexable files. A glob matches a
// file if path.Match matches it to the file's corpus path (slash-separated,
// relative to the directory) or to its base name, case-sensitively: "*.go"
// matches every .go file, "docs/*.md" the .md files in docs.
//
// Links are kept by Indexable whatever the Selection (doc.go, Links, 5):
// a Doc depends on its path and bytes alone.
type Selection struct {
	// Include, if not empty, replaces DefaultInclude: a file is chosen if
	// any of its globs matches it.
	Include []string
	// Exclude removes from the files chosen those any of its globs
	// matches.
	Exclude []string
}

// Validate checks every glob: an error wrapping ErrBadGlob names the
// first malformed or empty one.
func (s Selection) Validate() error {
	for _, g := range slices.Concat(s.Include, s.Exclude) {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("%w: %q", ErrBadGlob, g)
		}
	}
	return nil
}

// Chooses reports whether the file at corpus path p is chosen. A glob
// Validate refuses matches nothing.
func (s Selection) Chooses(p string) bool {
	in := Indexable(p)
	if len(s.Include) > 0 {
		in = matchAny(s.Include, p)
	}
	return in && !matchAny(s.Exclude, p)
}

// matchAny reports whether any glob matches p or its base name.
func matchAny(globs []string, p string) bool {
	base := path.Base(p)
	for _, g := range globs {
		if ok, _ := path.Match(g, p); ok {
			return true
		}
		if ok, _ := path.Match(g, base); ok {
			return true
		}
	}
	return false
}

// Listing is what ListDir found under a directory.
type Listing struct {
	// Files are the regular files the Selection chose, sorted by path.
	Files []File
	// Bad are the directories and files the walk could not read, and the
	// chosen files that could not be stat'ed.
	Bad []BadFile
	// Skipped counts the regular files the Selection did not choose, by
	// the extension of their name as path.Ext gives it ("" for none).
	// Names starting with "." and symbolic links are skipped uncounted.
	Skipped map[string]int
}

// ScanDir lists the Indexable files under dir: ListDir with the zero
// Selection.
func ScanDir(dir string) ([]File, []BadFile, error) {
	l, err := ListDir(dir, Selection{})
	return l.Files, l.Bad, err
}

// ListDir lists the corpus under dir without reading any file: every
// regular file sel chooses, files and directories whose name starts with
// "." and symbolic links skipped, sorted by path; the regular files sel
// does not choose are counted by extension. A directory it cannot read is
// returned as a bad file, and the rest listed; only an unreadable dir
// itself is an error. File names are kept as bytes: they need not be
// valid UTF-8. sel must be valid (Selection.Validate).
func ListDir(dir string, sel Selection) (Listing, error) { return listDir(dir, sel, nil) }

// listSeenEvery is how many files listDir lists between its reports.
const listSeenEvery = 64

// listDir is ListDir telling seen (if set) the files listed so far, every
// listSeenEvery and once at the end.
func listDir(dir string, sel Selection, seen func(n int)) (Listing, error) {
	l := Listing{Skipped: map[string]int{}}
	if _, err := os.ReadDir(dir); err != nil {
		return l, fmt.Errorf("docindex: reading corpus %s: %w", dir, err)
	}
	err := filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		rel := relPath(dir, full)
		switch {
		case err != nil && d != nil && d.IsDir():
			l.Bad = append(l.Bad, BadFile{Path: rel + "/", Reason: err.Error()})
			return fs.SkipDir
		case err != nil:
			l.Bad = append(l.Bad, BadFile{Path: rel, Reason: err.Error()})
			return nil
		case rel != "." && strings.HasPrefix(d.Name(), "."):
			return skip(d)
		case !d.Type().IsRegular():
			return nil
		case !sel.Chooses(rel):
			l.Skipped[path.Ext(d.Name())]++
			return nil
		}
		f, reason := statFile(full, rel, d)
		if reason != "" {
			l.Bad = append(l.Bad, BadFile{Path: rel, Reason: reason})
			return nil
		}
		l.Files = append(l.Files, f)
		if seen != nil && len(l.Files)%listSeenEvery == 0 {
			seen(len(l.Files))
		}
		return nil
	})
	if seen != nil {
		seen(len(l.Files))
	}
	sort.Slice(l.Files, func(i, j int) bool { return l.Files[i].Path < l.Files[j].Path })
	return l, err
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
	return readFiles(context.Background(), files, nil)
}

// readFiles is ReadFiles telling read (if set) the files read so far, of
// how many: 0 before the first, then after each. It stops early, with
// what it read, once ctx ends.
func readFiles(ctx context.Context, files []File, read func(done, total int)) (map[string][]byte, []BadFile) {
	m := make(map[string][]byte, len(files))
	var bad []BadFile
	for i, f := range files {
		if read != nil {
			read(i, len(files))
		}
		if ctx.Err() != nil {
			break
		}
		b, err := f.Read()
		if err != nil {
			bad = append(bad, BadFile{Path: f.Path, Reason: err.Error()})
			continue
		}
		m[f.Path] = b
	}
	if read != nil && ctx.Err() == nil {
		read(len(files), len(files))
	}
	return m, bad
}
