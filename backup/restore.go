package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-992972ee/percolator"
)

// ErrNotEmpty: Restore's database holds a user cell or an observer
// registration; nothing was changed.
var ErrNotEmpty = errors.New("backup: the database is not empty")

// RestoreOptions configures Restore. The zero value is usable.
type RestoreOptions struct {
	// BatchCells and BatchBytes bound one transaction of the load: its
	// cells and their bytes (row, column and value). Defaults 1,000 and
	// 4 MiB, and never above the DB's transaction limits (DB.TxnLimits).
	BatchCells int
	BatchBytes int
	// Concurrency is how many transactions commit at once. Default 4.
	Concurrency int
	// Progress, if set, is called as the check and the load go on (after
	// each 1,000 records of the check, after each transaction of the
	// load), from one goroutine at a time.
	Progress func(Progress)
}

func (o *RestoreOptions) ensureDefaults(db *percolator.DB) {
	maxCells, maxBytes := db.TxnLimits()
	if o.BatchCells <= 0 {
		o.BatchCells = 1000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4 << 20
	}
	o.BatchCells, o.BatchBytes = min(o.BatchCells, maxCells), min(o.BatchBytes, maxBytes)
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
}

// Verify reads the whole backup in r and checks it (Reader: format,
// order, count, checksum), and returns what it holds. It checks the file
// alone; Restore checks its cells against the database too.
func Verify(r io.Reader, o ReadOptions) (Summary, error) {
	rd, err := NewReader(r, o)
	if err != nil {
		return Summary{}, err
	}
	for {
		if _, err := rd.Next(); err == io.EOF {
			return rd.Summary(), nil
		} else if err != nil {
			return Summary{}, err
		}
	}
}

// Restore loads the backup in r into db, which must hold no user cell and
// no observer (else ErrNotEmpty), in the two passes of the package doc:
// the whole file is checked before anything is written (a corrupt or
// truncated file is ErrCorrupt, a cell or observer db would refuse is
// percolator.ErrInvalidArgument, and db is left as it was), then its
// observers are registered without code and its cells loaded in
// transactions. r is read
// twice (from its start each time) and must not change meanwhile.
func Restore(ctx context.Context, db *percolator.DB, r io.ReadSeeker, o RestoreOptions) (Summary, error) {
	o.ensureDefaults(db)
	began := time.Now()
	if err := checkEmpty(ctx, db); err != nil {
		return Summary{}, err
	}
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return Summary{}, fmt.Errorf("backup: %w", err)
	}
	p := &progress{fn: o.Progress, total: size, began: began}
	checked, obs, err := check(ctx, db, r, &o, p)
	if err != nil {
		return Summary{}, err
	}
	if err := register(ctx, db, obs); err != nil {
		return Summary{}, err
	}
	if err := load(ctx, db, r, &o, p, checked); err != nil {
		return Summary{}, err
	}
	checked.Elapsed = time.Since(began)
	return checked, nil
}

// checkEmpty refuses a database with an observer or a user cell.
func checkEmpty(ctx context.Context, db *percolator.DB) error {
	obs, err := db.Observers(ctx)
	if err != nil {
		return fmt.Errorf("backup: reading the observers: %w", err)
	}
	if len(obs) > 0 {
		return fmt.Errorf("%w: observer %q is registered (on column %q); restore into a fresh database", ErrNotEmpty, obs[0].Name, obs[0].Column)
	}
	tx, err := db.BeginReadOnly(ctx)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for start := ""; ; {
		cells, next, err := tx.ScanRows(ctx, start, "", 1000, 1)
		if err != nil {
			return fmt.Errorf("backup: reading the database: %w", err)
		}
		if len(cells) > 0 {
			return fmt.Errorf("%w: it holds cells (%q/%s, ...); restore into a fresh database", ErrNotEmpty, cells[0].Row, cells[0].Column)
		}
		if next == "" {
			return nil
		}
		start = next
	}
}

// progress reports a restore's progress, one call at a time.
type progress struct {
	fn    func(Progress)
	total int64
	began time.Time
	mu    sync.Mutex
	cells int64 // loaded
	off   int64 // the furthest byte of the file loaded
}

func (p *progress) report(phase string, cells, bytes int64) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn(Progress{Phase: phase, Cells: cells, Bytes: bytes, Total: p.total, Elapsed: time.Since(p.began)})
}

// addLoaded counts n more cells loaded up to byte off of the file and
// reports it.
func (p *progress) addLoaded(n int, off int64) {
	p.mu.Lock()
	p.cells += int64(n)
	p.off = max(p.off, off)
	cells, off := p.cells, p.off
	p.mu.Unlock()
	p.report("load", cells, off)
}

// reader opens the backup in r from its start, reading values up to db's
// largest.
func reader(db *percolator.DB, r io.ReadSeeker) (*Reader, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return NewReader(r, ReadOptions{MaxValueSize: db.MaxValueSize()})
}

// check is the first pass: the whole file read and verified, every record
// checked against db. It writes nothing, and returns the observers.
func check(ctx context.Context, db *percolator.DB, r io.ReadSeeker, o *RestoreOptions, p *progress) (Summary, []percolator.Observer, error) {
	rd, err := reader(db, r)
	if err != nil {
		return Summary{}, nil, err
	}
	p.report("check", 0, 0) // the phase starts
	_, maxBytes := db.TxnLimits()
	c := checker{names: map[string]bool{}, kinds: map[string]bool{}, maxValue: db.MaxValueSize(), maxBytes: maxBytes}
	for n := 1; ; n++ {
		rec, err := rd.Next()
		if err == io.EOF {
			p.report("check", rd.cells, rd.Offset()) // the whole file
			return rd.Summary(), c.observers, nil
		}
		if err == nil {
			err = c.record(rec)
		}
		if err != nil {
			return Summary{}, nil, err
		}
		if n%1000 == 0 {
			if err := ctx.Err(); err != nil {
				return Summary{}, nil, err
			}
			p.report("check", rd.cells, rd.Offset())
		}
	}
}

// checker checks records against what the database accepts.
type checker struct {
	observers []percolator.Observer
	names     map[string]bool // observer names seen
	kinds     map[string]bool // observed column → weak
	maxValue  int             // the largest value of a cell
	maxBytes  int             // the most bytes of one transaction
}

func (c *checker) record(rec Record) error {
	if rec.Kind == KindObserver {
		return c.observer(rec.Observer)
	}
	cell := &rec.Cell
	if err := percolator.ValidateCell(string(cell.Row), cell.Column); err != nil {
		return fmt.Errorf("backup: cell %q/%s: %w", cell.Row, cell.Column, err)
	}
	if len(cell.Value) > c.maxValue {
		return fmt.Errorf("backup: cell %q/%s: %w: a value of %d bytes exceeds the database's MaxValueSize %d",
			cell.Row, cell.Column, percolator.ErrInvalidArgument, len(cell.Value), c.maxValue)
	}
	if size := cellSize(cell); size > c.maxBytes {
		return fmt.Errorf("backup: cell %q/%s: %w: its %d bytes exceed one transaction's %d (the database's MaxTxnBytes)",
			cell.Row, cell.Column, percolator.ErrInvalidArgument, size, c.maxBytes)
	}
	return nil
}

func (c *checker) observer(o percolator.Observer) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("backup: observer %q: %w", o.Name, err)
	}
	if c.names[o.Name] {
		return fmt.Errorf("backup: observer %q: %w: registered twice in the file", o.Name, percolator.ErrInvalidArgument)
	}
	if weak, ok := c.kinds[o.Column]; ok && weak != o.Weak {
		return fmt.Errorf("backup: observer %q: %w: column %q mixes weak and strong observers", o.Name, percolator.ErrInvalidArgument, o.Column)
	}
	c.names[o.Name], c.kinds[o.Column] = true, o.Weak
	c.observers = append(c.observers, o)
	return nil
}

// register registers the observers without code, before any cell is
// loaded: each load's commit then notifies its observed cells, as any
// commit does.
//
// Registering them after the load was tried: each registration's
// backfill then finds the cells of its column by a scan that, on an LSM
// store, steps again over every lock the load just deleted at each chunk
// of rows (a tombstone until a compaction), which made it quadratic in
// the cells: 2s for 10,000 rows, and growing with their square.
func register(ctx context.Context, db *percolator.DB, obs []percolator.Observer) error {
	for _, ob := range obs {
		if err := db.Observe(ctx, ob); err != nil {
			return fmt.Errorf("backup: registering observer %q: %w", ob.Name, err)
		}
	}
	return nil
}

// load is the second pass: the cells committed in batches, several at a
// time. The checksum must be the first pass's.
func load(ctx context.Context, db *percolator.DB, r io.ReadSeeker, o *RestoreOptions, p *progress, checked Summary) error {
	rd, err := reader(db, r)
	if err != nil {
		return err
	}
	p.report("load", 0, 0) // the phase starts
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	err = loadCells(gctx, db, rd, o, p, g)
	if werr := g.Wait(); werr != nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if rd.Summary().Checksum != checked.Checksum {
		return &CorruptError{Offset: rd.Offset(), Reason: "the file changed between the check and the load"}
	}
	return nil
}

// loadCells reads the records and hands each batch of cells to g (the
// observers were registered from the first pass).
func loadCells(ctx context.Context, db *percolator.DB, rd *Reader, o *RestoreOptions, p *progress, g *errgroup.Group) error {
	var b batch
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if rec.Kind == KindObserver {
			continue
		}
		if !b.fits(&rec.Cell, o) {
			commitBatch(ctx, db, g, b.cells, rd.Offset(), p)
			b = batch{}
		}
		b.add(rec.Cell)
		if ctx.Err() != nil {
			return ctx.Err() // a batch failed (g's context), or the caller's ended
		}
	}
	commitBatch(ctx, db, g, b.cells, rd.Offset(), p)
	return nil
}

// batch is the cells of one transaction of the load.
type batch struct {
	cells []percolator.Cell
	bytes int
}

// fits reports whether c may join the batch. A cell alone always fits:
// the check found it within the database's limits, which may exceed
// BatchBytes.
func (b *batch) fits(c *percolator.Cell, o *RestoreOptions) bool {
	return len(b.cells) == 0 || len(b.cells) < o.BatchCells && b.bytes+cellSize(c) <= o.BatchBytes
}

func (b *batch) add(c percolator.Cell) {
	b.cells = append(b.cells, c)
	b.bytes += cellSize(&c)
}

// cellSize is what a cell counts towards a transaction's MaxTxnBytes.
func cellSize(c *percolator.Cell) int { return len(c.Row) + len(c.Column) + len(c.Value) }

// commitBatch commits cells in one transaction, in g (waiting for a free
// slot), and reports the progress up to byte off of the file.
func commitBatch(ctx context.Context, db *percolator.DB, g *errgroup.Group, cells []percolator.Cell, off int64, p *progress) {
	if len(cells) == 0 {
		return
	}
	g.Go(func() error {
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			for _, c := range cells {
				if err := tx.Set(string(c.Row), c.Column, c.Value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("backup: loading %d cells from %q/%s: %w", len(cells), cells[0].Row, cells[0].Column, err)
		}
		p.addLoaded(len(cells), off)
		return nil
	})
}
