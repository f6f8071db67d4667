package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// Scan delivers rows in chunks: it reads up to scanChunkRows rows (or
// scanChunkBytes of values) through iterators that share one view, closes
// them, and only then calls fn. fn may therefore call back into the store,
// and a slow fn pins no memtable or sstable. Each row is a consistent view;
// the range is not.
const (
	scanChunkRows  = 64
	scanChunkBytes = 1 << 20
)

// Scan implements storage.Store.
func (s *Store) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := s.ScanCounted(ctx, start, end, filter, limit, fn)
	return err
}

// ScanCounted implements storage.Counted: the keys visited are pebble's
// count of the internal points its iterators stepped over, tombstones of
// deleted cells included (until a compaction drops them).
func (s *Store) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (visited uint64, err error) {
	if err := storage.CheckScan(start, end, filter, limit); err != nil {
		return 0, err
	}
	if err := s.latches.awaitAllCommits(ctx); err != nil {
		return 0, err
	}
	groups := groupByFamily(filter)
	cursor := start
	for {
		if err := ctx.Err(); err != nil {
			return visited, err
		}
		n := scanChunkRows
		if limit > 0 {
			n = min(n, limit)
		}
		rows, next, points, err := s.scanChunk(groups, cursor, end, n)
		visited += points
		if err != nil {
			return visited, err
		}
		// Settled as a range: the rows returned, and those a sync in
		// flight emptied, which a power loss would bring back.
		chunkEnd := end
		if next != nil {
			chunkEnd = next
		}
		if err := s.latches.waitRange(ctx, cursor, chunkEnd, filter); err != nil {
			return visited, err
		}
		if err := s.guard.failure(); err != nil {
			return visited, err
		}
		for _, r := range rows {
			if !fn(r) {
				return visited, nil
			}
		}
		if limit > 0 {
			if limit -= len(rows); limit == 0 {
				return visited, nil
			}
		}
		if next == nil {
			return visited, nil
		}
		cursor = next
	}
}

// scanChunk returns up to n rows with selected cells in [from, end), the
// row to resume from (nil when the range is exhausted), and the points
// visited.
func (s *Store) scanChunk(groups []group, from, end []byte, n int) (rows []storage.Row, next []byte, points uint64, err error) {
	if err := s.guard.enter(); err != nil {
		return nil, nil, 0, err
	}
	defer s.guard.exit()
	if len(groups) == 0 {
		return nil, nil, 0, nil
	}
	sc, err := s.newScanner(groups, from, end)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("pebble: scan: %w", err)
	}
	defer func() {
		points = sc.points()
		err = errors.Join(err, sc.close())
	}()
	size := 0
	for len(rows) < n && size < scanChunkBytes {
		row, ok, err := sc.nextRow()
		if err != nil || !ok {
			return rows, nil, 0, err
		}
		rows = append(rows, row)
		for _, c := range row.Cells {
			size += len(c.Value)
		}
	}
	return rows, sc.resume(), 0, nil
}

// scanner walks several family keyspaces in row order: one iterator per
// family, all cloned from the first so they read one view.
type scanner struct {
	groups []group
	its    []*pebble.Iterator
	r      reader
	row    []byte // escaped row of the last row visited
	prefix []byte // scratch row prefix
}

func (s *Store) newScanner(groups []group, from, end []byte) (*scanner, error) {
	sc := &scanner{groups: groups}
	for i := range groups {
		opts := scanBounds(groups[i].family, from, end)
		var it *pebble.Iterator
		var err error
		if i == 0 {
			it, err = s.db.NewIter(opts)
		} else {
			it, err = sc.its[0].Clone(pebble.CloneOptions{IterOptions: opts})
		}
		if err != nil {
			return nil, errors.Join(err, sc.close())
		}
		it.First()
		sc.its = append(sc.its, it)
	}
	return sc, nil
}

// scanBounds bounds a family's keyspace to the rows [from, end).
func scanBounds(family string, from, end []byte) *pebble.IterOptions {
	o := &pebble.IterOptions{LowerBound: appendFamilyStart(nil, family), UpperBound: appendFamilyEnd(nil, family)}
	if len(from) > 0 {
		o.LowerBound = appendRowPrefix(nil, family, from)
	}
	if len(end) > 0 {
		o.UpperBound = appendRowPrefix(nil, family, end)
	}
	return o
}

// points is the internal points the scanner's iterators visited.
func (sc *scanner) points() uint64 {
	var n uint64
	for _, it := range sc.its {
		n += it.Stats().InternalStats.PointCount
	}
	return n
}

func (sc *scanner) close() error {
	var err error
	for _, it := range sc.its {
		err = errors.Join(err, it.Close())
	}
	return err
}

// escapedRow returns the escaped row of iterator i's current key.
func (sc *scanner) escapedRow(i int) ([]byte, error) {
	k := sc.its[i].Key()[len(sc.groups[i].family)+1:]
	n, err := escapedLen(k)
	return k[:n], err
}

// nextRow returns the next row with at least one selected cell.
func (sc *scanner) nextRow() (storage.Row, bool, error) {
	for {
		ok, err := sc.minRow()
		if err != nil || !ok {
			return storage.Row{}, false, err
		}
		sc.r.cells = nil
		for i := range sc.groups {
			sc.readRowIn(i)
		}
		if sc.r.err != nil {
			return storage.Row{}, false, sc.r.err
		}
		if len(sc.r.cells) > 0 {
			return storage.Row{Key: unescape(nil, sc.row), Cells: sc.r.cells}, true, nil
		}
	}
}

// minRow sets sc.row to the smallest escaped row any iterator is on.
func (sc *scanner) minRow() (bool, error) {
	found := false
	for i, it := range sc.its {
		if !it.Valid() {
			if err := it.Error(); err != nil {
				return false, err
			}
			continue
		}
		row, err := sc.escapedRow(i)
		if err != nil {
			return false, err
		}
		if !found || bytes.Compare(row, sc.row) < 0 {
			sc.row = append(sc.row[:0], row...)
			found = true
		}
	}
	return found, nil
}

// readRowIn reads sc.row's cells in family i, if its iterator is on that
// row, and moves the iterator past the row.
func (sc *scanner) readRowIn(i int) {
	it := sc.its[i]
	sc.prefix = append(appendFamilyStart(sc.prefix[:0], sc.groups[i].family), sc.row...)
	if !it.Valid() || !bytes.HasPrefix(it.Key(), sc.prefix) {
		return
	}
	sc.r.it = it
	sc.r.readFamilyRow(&sc.groups[i], sc.prefix, true)
	if it.Valid() && bytes.HasPrefix(it.Key(), sc.prefix) {
		it.SeekGE(storage.AppendPrefixEnd(nil, sc.prefix))
	}
}

// resume returns the smallest row after the last one visited.
func (sc *scanner) resume() []byte {
	return append(unescape(nil, sc.row), 0x00)
}
