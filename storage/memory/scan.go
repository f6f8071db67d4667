package memory

import (
	"context"

	"github.com/seed-992972ee/percolator/storage"
)

// scanChunk is how many rows Scan collects under the read lock before it
// releases the lock and calls fn: fn may call back into the store.
const scanChunk = 64

// Scan implements storage.Store. Each row is read under the read lock; the
// lock is never held while fn runs.
func (s *Store) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := s.ScanCounted(ctx, start, end, filter, limit, fn)
	return err
}

// ScanCounted implements storage.Counted. The store keeps no deletion
// markers, so the keys visited are the versions stored in the filter's
// families of the rows visited.
func (s *Store) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (visited uint64, err error) {
	if err := storage.CheckScan(start, end, filter, limit); err != nil {
		return 0, err
	}
	groups := groupByFamily(filter)
	cursor := string(start)
	for {
		if err := ctx.Err(); err != nil {
			return visited, err
		}
		chunk := scanChunk
		if limit > 0 && limit < chunk {
			chunk = limit // visit no more than the rows asked for
		}
		rows, next, n, err := s.scanChunk(cursor, end, groups, chunk)
		visited += n
		if err != nil {
			return visited, err
		}
		for _, r := range rows {
			if !fn(r) {
				return visited, nil
			}
			if limit--; limit == 0 {
				return visited, nil
			}
		}
		if next == nil {
			return visited, nil
		}
		cursor = *next
	}
}

// scanChunk returns up to n rows with selected cells at or after cursor and
// before end, the cursor to resume from (nil when the range is done), and
// the keys visited.
func (s *Store) scanChunk(cursor string, end []byte, groups []group, n int) (rows []storage.Row, next *string, visited uint64, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, nil, 0, storage.ErrClosed
	}
	for len(rows) < n {
		key, ok := s.nextRowLocked(cursor, groups)
		if !ok || (len(end) > 0 && key >= string(end)) {
			return rows, nil, visited, nil
		}
		visited += s.versionsLocked(key, groups)
		if cells := s.readLocked(key, groups); len(cells) > 0 {
			rows = append(rows, storage.Row{Key: []byte(key), Cells: cells})
		}
		cursor = key + "\x00" // the smallest key after key
	}
	return rows, &cursor, visited, nil
}

// versionsLocked counts the versions row holds in the groups' families.
func (s *Store) versionsLocked(row string, groups []group) uint64 {
	n := 0
	for i := range groups {
		if f := s.mu.families[groups[i].family]; f != nil && f.rows[row] != nil {
			for _, c := range f.rows[row].cols {
				n += len(c.versions)
			}
		}
	}
	return uint64(n)
}

// nextRowLocked returns the smallest row >= cursor present in any of the
// groups' families.
func (s *Store) nextRowLocked(cursor string, groups []group) (string, bool) {
	var key string
	found := false
	for i := range groups {
		f := s.mu.families[groups[i].family]
		if f == nil {
			continue
		}
		if n := f.order.seekGE(cursor); n != nil && (!found || n.key < key) {
			key, found = n.key, true
		}
	}
	return key, found
}
