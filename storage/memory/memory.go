package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/seed-992972ee/percolator/storage"
)

// Store is an in-memory storage.Store. All methods are safe for concurrent
// use. Reads share mu; writes hold it exclusively for the time it takes to
// change the maps (and to run the apply hook).
type Store struct {
	mu struct {
		sync.RWMutex
		closed   bool
		families map[string]*family // created on first Put, never removed
		nextSeed uint64
		hook     storage.ApplyHook
		hookGen  uint64 // bumped when the hook is installed or removed
	}
}

// family is the keyspace of one column family.
//
// Invariant: rows and order hold the same keys, and no famRow is empty.
type family struct {
	rows  map[string]*famRow
	order *skiplist
}

var (
	_ storage.Store       = (*Store)(nil)
	_ storage.Batcher     = (*Store)(nil)
	_ storage.Deferred    = (*Store)(nil)
	_ storage.Exclusive   = (*Store)(nil)
	_ storage.ApplyHooker = (*Store)(nil)
	_ storage.Counted     = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	s := &Store{}
	s.mu.families = make(map[string]*family)
	return s
}

// Exclusive reports true: every write passes through this Store.
func (s *Store) Exclusive() bool { return true }

// SetApplyHook implements storage.ApplyHooker (one hook at a time): hook
// is called under the store's write lock after each write that applied at
// least one mutation.
func (s *Store) SetApplyHook(hook storage.ApplyHook) (func(), error) {
	if hook == nil {
		return nil, fmt.Errorf("%w: nil apply hook", storage.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.hook != nil {
		return nil, fmt.Errorf("memory: apply hook: %w (another client keeps an index of this store)", storage.ErrInUse)
	}
	s.mu.hook = hook
	s.mu.hookGen++
	gen := s.mu.hookGen
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.hookGen == gen {
			s.mu.hook = nil
			s.mu.hookGen++
		}
	}, nil
}

// Close drops the contents. Later calls return storage.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return storage.ErrClosed
	}
	s.mu.closed = true
	s.mu.families = nil
	return nil
}

// ReadRow implements storage.Store.
func (s *Store) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := storage.CheckRead(ctx, row, filter); err != nil {
		return storage.Row{}, err
	}
	groups := groupByFamily(filter)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return storage.Row{}, storage.ErrClosed
	}
	return storage.Row{Key: slices.Clone(row), Cells: s.readLocked(string(row), groups)}, nil
}

// readLocked returns copies of the cells of row selected by groups.
func (s *Store) readLocked(row string, groups []group) []storage.Cell {
	var cells []storage.Cell
	for i := range groups {
		g := &groups[i]
		f := s.mu.families[g.family]
		if f == nil {
			continue
		}
		if r := f.rows[row]; r != nil {
			cells = g.appendRow(cells, r)
		}
	}
	return cells
}

// appendRow appends copies of the cells of r selected by g.
func (g *group) appendRow(cells []storage.Cell, r *famRow) []storage.Cell {
	g.selectRow(r, func(c *column, v *version) bool {
		cells = append(cells, storage.Cell{
			Family:    g.family,
			Qualifier: c.qualifier,
			TS:        v.ts,
			Value:     slices.Clone(v.value),
		})
		return true
	})
	return cells
}

// hasCellLocked reports whether groups select any cell of row.
func (s *Store) hasCellLocked(row string, groups []group) bool {
	for i := range groups {
		g := &groups[i]
		f := s.mu.families[g.family]
		if f == nil || f.rows[row] == nil {
			continue
		}
		if !g.selectRow(f.rows[row], func(*column, *version) bool { return false }) {
			return true
		}
	}
	return false
}
