package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// ReadRow implements storage.Store. It takes no latch: every write commits
// as one pebble batch, and one iterator reads one point-in-time view.
func (s *Store) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := s.guard.enter(); err != nil {
		return storage.Row{}, err
	}
	defer s.guard.exit()
	if err := storage.CheckRead(ctx, row, filter); err != nil {
		return storage.Row{}, err
	}
	if err := s.latches.awaitCommit(ctx, row); err != nil {
		return storage.Row{}, err
	}
	cells, err := s.readRow(row, filter, false)
	if err == nil {
		err = s.settle(ctx, row, filter)
	}
	if err != nil {
		return storage.Row{}, err
	}
	return storage.Row{Key: slices.Clone(row), Cells: cells}, nil
}

// UnderLatch returns a view of the store for reads made while the caller
// holds a row's latch (a one-phase commit's guard, which reads the
// observer registry's version): its ReadRow neither waits for one-phase
// commits in flight nor settles, either of which could wait for the very
// latch the caller holds. It may return a write whose sync is still in
// flight. Its other methods are the store's.
func (s *Store) UnderLatch() storage.Store { return underLatch{s} }

type underLatch struct{ *Store }

func (u underLatch) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := u.guard.enter(); err != nil {
		return storage.Row{}, err
	}
	defer u.guard.exit()
	if err := storage.CheckRead(ctx, row, filter); err != nil {
		return storage.Row{}, err
	}
	cells, err := u.readRow(row, filter, false)
	if err != nil {
		return storage.Row{}, err
	}
	return storage.Row{Key: slices.Clone(row), Cells: cells}, nil
}

// AwaitOnePhase returns once no one-phase commit or async prewrite of
// row that was in flight when it was called still is
// (CommitOnePhaseGuarded, PrewriteAsyncGuarded: calls that take their
// timestamp under the latch), or ctx's error: the owner's index calls it
// before it answers a read of row from memory, as ReadRow does before it
// reads the store.
func (s *Store) AwaitOnePhase(ctx context.Context, row []byte) error {
	return s.latches.awaitCommit(ctx, row)
}

// AwaitAllOnePhase is AwaitOnePhase for every row, as a scan waits: an
// index the apply hook keeps (the server's locks) is then up to date
// with every commit whose timestamp was handed out before the call.
func (s *Store) AwaitAllOnePhase(ctx context.Context) error {
	return s.latches.awaitAllCommits(ctx)
}

// settle is the last step of every read that returns row to a caller
// (storage.Store, "Visibility and durability"): pebble publishes a batch
// before its log sync returns, so a read may have seen a durable write
// whose sync is still in flight. settle waits for such a write on row's
// stripe when it may change what filter selects in row (a put of a
// selected cell, a delete of selected versions: storage.Filter.Touches),
// and returns the store's failure if a sync failed, so a read never
// returns a write a power loss could take back, nor misses a cell a
// power loss could bring back. Reads under a latch
// (predicates) do not settle: the latch already orders them after every
// earlier write of the row. A read whose ctx ends while it waits returns
// ctx's error.
func (s *Store) settle(ctx context.Context, row []byte, filter storage.Filter) error {
	if err := s.latches.wait(ctx, row, filter); err != nil {
		return err
	}
	return s.guard.failure()
}

// readRow returns the cells of row selected by filter, or only the first
// of them when first is set.
func (s *Store) readRow(row []byte, filter storage.Filter, first bool) ([]storage.Cell, error) {
	if len(filter) == 0 {
		return nil, nil
	}
	if sel, ok := exactCell(filter); ok {
		return s.getCell(row, &sel)
	}
	it, err := s.newPointIter()
	if err != nil {
		return nil, fmt.Errorf("pebble: read %q: %w", row, err)
	}
	cells, err := readGroupsIn(it, row, groupByFamily(filter), first)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pebble: read %q: %w", row, cerr)
	}
	return cells, err
}

// newPointIter is an iterator for point reads of rows (readGroupsIn).
func (s *Store) newPointIter() (*pebble.Iterator, error) {
	// Bloom filters on every level, the last included (pebble skips it by
	// default): a point read of a column no table holds reads no block.
	return s.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
}

// readGroupsIn reads the cells of row that groups (a filter grouped by
// family) select, or only the first when first is set, through it, which
// the caller made (newPointIter) after every write the read must see and
// closes. Reads of many rows through one iterator, a family at a time and
// the rows in key order (predicates), reuse the tables it has open where
// each read through an iterator of its own opened them again.
func readGroupsIn(it *pebble.Iterator, row []byte, groups []group, first bool) ([]storage.Cell, error) {
	r := readerPool.Get().(*reader)
	defer r.release()
	r.it, r.first, r.point = it, first, true
	for i := range groups {
		r.prefix = appendRowPrefix(r.prefix[:0], groups[i].family, row)
		r.end = storage.AppendPrefixEnd(r.end[:0], r.prefix)
		it.SetBounds(r.prefix, r.end) // copies the bounds
		if r.readFamilyRow(&groups[i], r.prefix, false); r.done() {
			break
		}
	}
	if err := errors.Join(r.err, it.Error()); err != nil {
		return nil, fmt.Errorf("pebble: read %q: %w", row, err)
	}
	return r.cells, nil
}

// readerPool recycles readers and their scratch buffers.
var readerPool = sync.Pool{New: func() any { return new(reader) }}

// release returns r to the pool; r.cells belongs to the caller by now.
func (r *reader) release() {
	r.it, r.first, r.point, r.cells, r.err = nil, false, false, nil, nil
	readerPool.Put(r)
}

// getCell is the fast path: one exact key, one Get, no iterator.
func (s *Store) getCell(row []byte, sel *storage.Selector) ([]storage.Cell, error) {
	key := make([]byte, 0, keyLen(sel.Family, row, sel.Qualifier))
	v, closer, err := s.db.Get(appendKey(key, sel.Family, row, sel.Qualifier, sel.Time.Start))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pebble: read %q: %w", row, err)
	}
	c := storage.Cell{Family: sel.Family, Qualifier: sel.Qualifier, TS: sel.Time.Start, Value: bytes.Clone(v)}
	return []storage.Cell{c}, closer.Close()
}

// reader collects the selected cells of one row, one family at a time,
// through an iterator whose bounds cover the row.
type reader struct {
	it     *pebble.Iterator
	first  bool // stop after the first selected cell
	point  bool // reading one row: a column's seek may be a prefix seek
	cells  []storage.Cell
	err    error
	col    []byte // the current column's key prefix
	seek   []byte // scratch for seek keys
	prefix []byte // scratch for row prefixes
	end    []byte // scratch for row ends
	counts []int
}

func (r *reader) done() bool { return r.err != nil || (r.first && len(r.cells) > 0) }

// readFamilyRow reads the cells of g's family in the row whose keys begin
// with rowPrefix. positioned means the iterator is already on the row's
// first key in the family. On return the iterator may still be inside the
// row; the caller seeks past it if it needs to.
func (r *reader) readFamilyRow(g *group, rowPrefix []byte, positioned bool) {
	if !g.all {
		g.eachQualifier(func(q string) bool {
			r.col = appendEscapedString(append(r.col[:0], rowPrefix...), q)
			r.readColumn(g, q, false)
			return !r.done()
		})
		return
	}
	valid := positioned || r.it.SeekGE(rowPrefix)
	for valid && bytes.HasPrefix(r.it.Key(), rowPrefix) {
		k := r.it.Key()
		r.col = append(r.col[:0], k[:len(k)-tsLen]...)
		q := string(unescape(nil, r.col[len(rowPrefix):]))
		if r.readColumn(g, q, true); r.done() {
			return
		}
		valid = r.it.Valid()
	}
}

// readColumn reads the versions of the column r.col (qualifier q), newest
// first. positioned means the iterator is on the column's first version,
// in a walk of every column of the row: readColumn then leaves it past
// the column (or exhausted). Otherwise it may leave it inside the column:
// the caller seeks for its next read (a hot cell's many versions are not
// skipped for nothing).
func (r *reader) readColumn(g *group, q string, positioned bool) {
	r.seek = appendTS(append(r.seek[:0], r.col...), g.seekTS(q))
	var valid bool
	switch {
	case !positioned && r.point:
		// The column's versions are one prefix (cellComparer): tables
		// without the column are skipped by their bloom filters.
		valid = r.it.SeekPrefixGE(r.seek)
	case !positioned:
		valid = r.it.SeekGE(r.seek)
	case bytes.Compare(r.it.Key(), r.seek) < 0:
		valid = r.it.SeekGE(r.seek)
	default:
		valid = true
	}
	r.counts = slices.Grow(r.counts[:0], len(g.sels))[:len(g.sels)]
	clear(r.counts)
	for valid {
		k := r.it.Key()
		if !bytes.HasPrefix(k, r.col) {
			return
		}
		ts := decodeTS(k)
		selected, more := g.selects(q, ts, r.counts)
		if selected {
			r.emit(g.family, q, ts)
		}
		if r.done() {
			return
		}
		if !more {
			if positioned {
				r.skipColumn()
			}
			return
		}
		valid = r.it.Next()
	}
}

// emit appends a copy of the current cell.
func (r *reader) emit(family, qualifier string, ts uint64) {
	v, err := r.it.ValueAndErr()
	if err != nil {
		r.err = err
		return
	}
	r.cells = append(r.cells, storage.Cell{Family: family, Qualifier: qualifier, TS: ts, Value: bytes.Clone(v)})
}

// skipColumn moves past the rest of the column: one Next usually leaves
// it (a column rarely has many versions); otherwise seek.
func (r *reader) skipColumn() {
	if r.it.Next() && bytes.HasPrefix(r.it.Key(), r.col) {
		r.seek = storage.AppendPrefixEnd(r.seek[:0], r.col)
		r.it.SeekGE(r.seek)
	}
}
