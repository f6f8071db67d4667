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
	if err := storage.CheckScan(start, end, filter, limit); err != nil {
		return err
	}
	groups := groupByFamily(filter)
	cursor := string(start)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows, next, err := s.scanChunk(cursor, end, groups, scanChunk)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if !fn(r) {
				return nil
			}
			if limit--; limit == 0 {
				return nil
			}
		}
		if next == nil {
			return nil
		}
		cursor = *next
	}
}

// scanChunk returns up to n rows with selected cells at or after cursor and
// before end, and the cursor to resume from (nil when the range is done).
func (s *Store) scanChunk(cursor string, end []byte, groups []group, n int) ([]storage.Row, *string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, nil, storage.ErrClosed
	}
	var rows []storage.Row
	for len(rows) < n {
		key, ok := s.nextRowLocked(cursor, groups)
		if !ok || (len(end) > 0 && key >= string(end)) {
			return rows, nil, nil
		}
		if cells := s.readLocked(key, groups); len(cells) > 0 {
			rows = append(rows, storage.Row{Key: []byte(key), Cells: cells})
		}
		cursor = key + "\x00" // the smallest key after key
	}
	return rows, &cursor, nil
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
