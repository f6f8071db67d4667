package docindex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
)

// DefaultMaxFileSize is SyncOptions.MaxFileSize's default: the largest
// value a percolator store takes by default (Options.MaxValueSize).
const DefaultMaxFileSize = 10 << 20

// ErrTooManyDeletes is wrapped by Sync's error when a sync would delete
// more than half of the indexed documents and SyncOptions.AllowDeletes is
// not set: an empty or wrong source directory (an unmounted disk) reads as
// "every file deleted".
var ErrTooManyDeletes = errors.New("docindex: refusing to delete more than half of the indexed documents")

// racyWindow: a file modified this close to the start of a sync (or
// after) could change again within the file system's time granularity
// with the same size, so its Stat is not stored and the next sync reads it
// again (git's "racily clean" entries).
const racyWindow = 2 * time.Second

// SyncOptions configures Sync. The zero value is usable.
type SyncOptions struct {
	// Load bounds the loader's concurrency and reports its progress over
	// the files to read; Sync sets its OnError.
	Load percolator.LoadOptions
	// MaxFileSize is the largest file Sync loads; a larger one is a bad
	// file. 0 means DefaultMaxFileSize. It must not exceed the store's
	// value limit, or such files fail the store's check instead (also
	// reported as bad files).
	MaxFileSize int64
	// Rehash reads and compares every file, even those whose Stat did
	// not change since they were loaded.
	Rehash bool
	// AllowDeletes lets a sync delete more than half of the indexed
	// documents.
	AllowDeletes bool
	// ReadIndexed, if set, is told how many of the indexed documents'
	// records Sync read so far, to compare the files with: 0 before the
	// first, then after each page of them. It is called before the load.
	ReadIndexed func(n int64)
}

// SyncStats counts what Sync did. Every file given is counted once, in
// New, Changed, Unchanged or Bad; Deleted counts indexed paths with no
// file.
type SyncStats struct {
	New, Changed, Deleted, Unchanged int
	// Read is how many files were read and hashed; the other unchanged
	// ones were skipped by their Stat.
	Read int
	// Bad lists the files skipped, and why; the index keeps what it held
	// for them.
	Bad []BadFile
}

// outcome is what loading one file did.
type outcome uint8

const (
	outNone outcome = iota
	outNew
	outChanged
	outUnchanged
	outBad
)

// badFileError is an item's error that makes the file bad rather than
// stopping the sync.
type badFileError struct{ reason string }

func (e *badFileError) Error() string { return e.reason }

// Sync makes the stored corpus equal files, given as ScanDir or MemFiles
// return them, plus the bad files found listing them: new and changed
// files are written, indexed paths with no file deleted (unless they lie
// under a bad file or directory, whose indexed content is kept), each in
// its own loader transaction. A file whose Stat equals the one stored when
// it was loaded is not read (unless opts.Rehash). A file that cannot be
// read, is over opts.MaxFileSize or has a path over MaxPathSize is skipped
// and listed in SyncStats.Bad, and the rest synced; only a failure of the
// store stops Sync. It refuses, before writing anything, to delete more
// than half of the indexed documents unless opts.AllowDeletes.
func Sync(ctx context.Context, db *percolator.DB, files []File, bad []BadFile, opts SyncOptions) (SyncStats, error) {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	loaded, err := readLoaded(ctx, db, opts.ReadIndexed)
	if err != nil {
		return SyncStats{}, err
	}
	s := &syncer{db: db, opts: opts, loaded: loaded, since: time.Now().Add(-racyWindow).UnixNano()}
	s.st.Bad = append(s.st.Bad, bad...)
	s.plan(files)
	if err := s.checkDeletes(); err != nil {
		return s.st, err
	}
	return s.st, s.load(ctx)
}

// syncer is the state of one Sync.
type syncer struct {
	db     *percolator.DB
	opts   SyncOptions
	loaded map[string]loadedRecord
	since  int64 // files modified at or after this (ns) are racy
	st     SyncStats

	items    []syncItem
	outcomes []outcome // per item; an item's retries overwrite its own
	reasons  []string  // per item, for outBad
}

// syncItem is one file to read (file.Read != nil) or path to delete.
type syncItem struct {
	path string
	file File
}

// plan decides, without reading, which files to read and which paths to
// delete.
func (s *syncer) plan(files []File) {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		seen[f.Path] = true
		if err := checkPath(f.Path); err != nil {
			s.st.Bad = append(s.st.Bad, BadFile{Path: f.Path, Reason: err.Error()})
			continue
		}
		rec, ok := s.loaded[f.Path]
		if ok && !s.opts.Rehash && f.Stat != (Stat{}) && rec.stat == f.Stat {
			s.st.Unchanged++
			continue
		}
		s.items = append(s.items, syncItem{path: f.Path, file: f})
	}
	bad := newBadSet(s.st.Bad)
	for p := range s.loaded {
		if !seen[p] && !bad.covers(p) {
			s.items = append(s.items, syncItem{path: p})
			s.st.Deleted++
		}
	}
}

func (s *syncer) checkDeletes() error {
	if s.opts.AllowDeletes || s.st.Deleted*2 <= len(s.loaded) {
		return nil
	}
	return fmt.Errorf("%w: %d of %d would be deleted (is the source directory the right one, and mounted?); allow it explicitly to go on",
		ErrTooManyDeletes, s.st.Deleted, len(s.loaded))
}

// load runs the items through the loader, bad files skipped, and counts
// the outcomes.
func (s *syncer) load(ctx context.Context) error {
	s.outcomes = make([]outcome, len(s.items))
	s.reasons = make([]string, len(s.items))
	lo := s.opts.Load
	lo.OnError = s.onError
	if lo.Progress != nil {
		lo.Progress(0, len(s.items)) // the step starts, its total known
	}
	err := s.db.Load(ctx, len(s.items), lo, func(tx *percolator.Txn, i int) error {
		return s.loadItem(tx, i)
	})
	for i, o := range s.outcomes {
		s.count(i, o)
	}
	return err
}

func (s *syncer) count(i int, o outcome) {
	switch o {
	case outNew:
		s.st.New++
	case outChanged:
		s.st.Changed++
	case outUnchanged:
		s.st.Unchanged++
	case outBad:
		s.st.Bad = append(s.st.Bad, BadFile{Path: s.items[i].path, Reason: s.reasons[i]})
	}
	if o != outNone && o != outBad && s.items[i].file.Read != nil {
		s.st.Read++
	}
}

// onError makes an item bad if its file was (or the store refused its
// content or key), and stops the sync otherwise.
func (s *syncer) onError(i int, err error) error {
	var bf *badFileError
	switch {
	case errors.As(err, &bf):
		s.reasons[i] = bf.reason
	case errors.Is(err, percolator.ErrInvalidArgument):
		s.reasons[i] = "the store refused it: " + err.Error()
	default:
		return err
	}
	s.outcomes[i] = outBad
	return nil
}

// loadItem writes (or deletes) one file in tx.
func (s *syncer) loadItem(tx *percolator.Txn, i int) error {
	it := s.items[i]
	row := docRow(it.path)
	if it.file.Read == nil {
		return deleteColumns(tx, row, colContent, colLoaded)
	}
	content, err := s.read(it.file)
	if err != nil {
		return err
	}
	h := hashOf(content)
	rec, was := s.loaded[it.path]
	stat := it.file.Stat
	if stat.ModTime >= s.since {
		stat = Stat{} // racy: read it again next time
	}
	loaded := encodeLoaded(h, stat)
	switch {
	case was && rec.hash == h:
		s.outcomes[i] = outUnchanged
		if rec.stat == stat {
			return nil
		}
		return tx.Set(row, colLoaded, loaded)
	case was:
		s.outcomes[i] = outChanged
	default:
		s.outcomes[i] = outNew
	}
	if err := tx.Set(row, colContent, content); err != nil {
		return err
	}
	return tx.Set(row, colLoaded, loaded)
}

// read reads a file, refusing one over the size limit.
func (s *syncer) read(f File) ([]byte, error) {
	limit := s.opts.MaxFileSize
	if f.Stat.Size > limit {
		return nil, &badFileError{fmt.Sprintf("file of %d bytes exceeds the limit of %d bytes", f.Stat.Size, limit)}
	}
	b, err := f.Read()
	switch {
	case err != nil:
		return nil, &badFileError{err.Error()}
	case int64(len(b)) > limit:
		return nil, &badFileError{fmt.Sprintf("file of %d bytes exceeds the limit of %d bytes", len(b), limit)}
	}
	return b, nil
}

// loadedRecord is a doc's loaded cell: the content hash and file Stat
// when it was loaded.
type loadedRecord struct {
	hash string
	stat Stat
}

func encodeLoaded(hash string, st Stat) []byte {
	b := appendString(nil, hash)
	b = appendUvarints(b, uint64(st.Size), uint64(st.ModTime), st.Inode)
	return b
}

func decodeLoaded(v []byte) (loadedRecord, error) {
	d := decoder{b: v}
	r := loadedRecord{hash: d.string()}
	r.stat = Stat{Size: int64(d.uvarint()), ModTime: int64(d.uvarint()), Inode: d.uvarint()}
	return r, d.end()
}

// readLoaded reads every doc's loaded cell.
func readLoaded(ctx context.Context, db *percolator.DB, read func(n int64)) (map[string]loadedRecord, error) {
	loaded := map[string]loadedRecord{}
	if read != nil {
		read(0)
	}
	err := db.View(ctx, func(tx *percolator.Txn) error {
		s := &pagedScan{tx: tx, read: read}
		kvs, err := s.scan(ctx, docPrefix, colLoaded)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			rec, err := decodeLoaded(kv.Value)
			if err != nil {
				return fmt.Errorf("%q %s: %w", kv.Row, colLoaded, err)
			}
			loaded[strings.TrimPrefix(string(kv.Row), docPrefix)] = rec
		}
		return nil
	})
	return loaded, err
}

// badSet answers whether a path is a bad file or lies under a bad
// directory (a BadFile path ending in "/").
type badSet struct {
	files map[string]bool
	dirs  []string
}

func newBadSet(bad []BadFile) badSet {
	s := badSet{files: map[string]bool{}}
	for _, b := range bad {
		if strings.HasSuffix(b.Path, "/") {
			s.dirs = append(s.dirs, b.Path)
		} else {
			s.files[b.Path] = true
		}
	}
	return s
}

func (s badSet) covers(path string) bool {
	if s.files[path] {
		return true
	}
	for _, d := range s.dirs {
		if d == "./" || strings.HasPrefix(path, d) {
			return true
		}
	}
	return false
}
