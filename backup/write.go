package backup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/seed-992972ee/percolator"
)

// Options configures Write and WriteFile. The zero value is usable.
type Options struct {
	// PageCells and PageBytes bound one page of the snapshot read at a
	// time (Txn.ScanRows): whole rows, up to the row at which the page
	// holds PageCells cells or PageBytes bytes of values. They bound the
	// backup's memory. Defaults 1,000 and 4 MiB.
	PageCells int
	PageBytes int
	// Progress, if set, is called after each page with what was written
	// so far.
	Progress func(Progress)
	// Now is the clock the header's time is read from. Default time.Now.
	Now func() time.Time
	// Overwrite lets WriteFile replace a file at its path; without it an
	// existing file is ErrExists, left as it was.
	Overwrite bool

	// beforePage, if set, is called before each page is read with the
	// page's number (from 0) and the snapshot's start_ts (test knob).
	beforePage func(page int, startTS uint64)
}

func (o *Options) ensureDefaults() {
	if o.PageCells <= 0 {
		o.PageCells = 1000
	}
	if o.PageBytes <= 0 {
		o.PageBytes = 4 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Progress is how far a backup or a restore got: the cells and the bytes
// of the file written or read so far, of Total (0 when unknown), and the
// time since it began. Phase is "backup", or a restore's "check" or
// "load"; each phase is reported as it starts (no cells yet), then as
// it goes, and a check once more at the file's end.
type Progress struct {
	Phase   string
	Cells   int64
	Bytes   int64
	Total   int64
	Elapsed time.Duration
}

// Summary is what a backup file holds (and, from Write or Restore, how
// long it took): the snapshot's StartTS, when the backup began (Time), the
// Cells and Observers, the file's size (Bytes) and its SHA-256 (Checksum,
// as in its trailer).
type Summary struct {
	StartTS   uint64
	Time      time.Time
	Cells     int64
	Observers int64
	Bytes     int64
	Checksum  [sha256.Size]byte
	Elapsed   time.Duration
}

// ErrExists: WriteFile's path exists and Options.Overwrite is not set.
var ErrExists = errors.New("backup: the file exists")

// Write writes every committed user cell of db, as of one snapshot, and
// its observer registrations to w, in the file format of the package doc.
// It holds one read-only transaction open throughout (holding the
// garbage collector's safe point back) and reads in pages. On an error
// it stops with w holding a prefix of a file, without its trailer, which
// no Reader accepts; a snapshot the safe point passed is such an error
// (percolator.ErrSnapshotTooOld).
func Write(ctx context.Context, db *percolator.DB, w io.Writer, o Options) (Summary, error) {
	o.ensureDefaults()
	began := time.Now()
	tx, err := db.BeginReadOnly(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("backup: beginning the snapshot: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	obs, err := db.Observers(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("backup: reading the observers: %w", err)
	}
	ts, err := tx.StartTSContext(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("backup: the snapshot's timestamp: %w", err)
	}
	s := Summary{StartTS: ts, Time: o.Now().UTC(), Observers: int64(len(obs))}
	e := newEncoder(w)
	if err := e.header(Header{Version: FormatVersion, StartTS: s.StartTS, Time: s.Time}); err != nil {
		return Summary{}, writeErr(err)
	}
	for _, ob := range obs {
		if err := e.observer(ob); err != nil {
			return Summary{}, writeErr(err)
		}
	}
	if err := e.w.Flush(); err != nil {
		return Summary{}, writeErr(err)
	}
	if s.Cells, err = writeCells(ctx, tx, e, &o, began); err != nil {
		return Summary{}, err
	}
	if s.Checksum, err = e.finish(); err != nil {
		return Summary{}, writeErr(err)
	}
	s.Bytes, s.Elapsed = e.n, time.Since(began)
	return s, nil
}

// writeCells writes the snapshot's cells, page by page, and returns how
// many.
func writeCells(ctx context.Context, tx *percolator.Txn, e *encoder, o *Options, began time.Time) (int64, error) {
	var cells int64
	if o.Progress != nil {
		o.Progress(Progress{Phase: "backup", Bytes: e.n, Elapsed: time.Since(began)}) // the phase starts
	}
	for start, page := "", 0; ; page++ {
		if o.beforePage != nil {
			o.beforePage(page, tx.StartTS())
		}
		got, next, err := tx.ScanRows(ctx, start, "", o.PageCells, o.PageBytes)
		if err != nil {
			return 0, fmt.Errorf("backup: reading the snapshot at %d: %w", tx.StartTS(), err)
		}
		for _, c := range got {
			if err := e.cell(c); err != nil {
				return 0, writeErr(err)
			}
		}
		// Flushed page by page: what the progress counts is written.
		if err := e.w.Flush(); err != nil {
			return 0, writeErr(err)
		}
		cells += int64(len(got))
		if o.Progress != nil {
			o.Progress(Progress{Phase: "backup", Cells: cells, Bytes: e.n, Elapsed: time.Since(began)})
		}
		if next == "" {
			return cells, nil
		}
		start = next
	}
}

func writeErr(err error) error { return fmt.Errorf("backup: writing: %w", err) }

// WriteFile is Write to the file at path, which appears there complete or
// not at all: the backup is written to a temporary file in path's
// directory, synced, and renamed into place (the directory synced too)
// only once Write succeeded; on any failure the temporary file is
// removed. An existing file at path is ErrExists unless o.Overwrite. The
// file is readable by its owner only: it holds the database's data.
func WriteFile(ctx context.Context, db *percolator.DB, path string, o Options) (Summary, error) {
	if !o.Overwrite {
		if _, err := os.Lstat(path); err == nil {
			return Summary{}, fmt.Errorf("%w: %s", ErrExists, path)
		}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	var pe *fs.PathError
	if errors.As(err, &pe) { // its path is the temporary file's, which the caller never named
		return Summary{}, fmt.Errorf("backup: cannot create %s: %w", path, pe.Err)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	s, err := writeTemp(ctx, db, tmp, o)
	if err == nil {
		err = place(tmp.Name(), path, o.Overwrite)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return Summary{}, err
	}
	return s, nil
}

// writeTemp writes the backup to f, syncs and closes it.
func writeTemp(ctx context.Context, db *percolator.DB, f *os.File, o Options) (Summary, error) {
	s, err := Write(ctx, db, f, o)
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("backup: syncing %s: %w", f.Name(), err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("backup: %w", cerr)
	}
	return s, err
}

// place moves the complete file tmp to path and syncs the directory.
// Without overwrite it links rather than renames, so a file created at
// path meanwhile is never replaced.
func place(tmp, path string, overwrite bool) error {
	var err error
	if overwrite {
		err = os.Rename(tmp, path)
	} else if err = os.Link(tmp, path); err == nil {
		_ = os.Remove(tmp) // the backup is in place: a temporary name left over is clutter, not a failure
	} else if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, path)
	} else if _, serr := os.Lstat(path); serr == nil {
		return fmt.Errorf("%w: %s", ErrExists, path)
	} else {
		err = os.Rename(tmp, path) // a file system without hard links
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes the directory's entries durable: a power cut must not
// take the renamed file away.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: syncing %s: %w", dir, err)
	}
	return nil
}
