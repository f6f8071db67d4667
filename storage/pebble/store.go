package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// ErrLocked is returned by Open when another Store, in this process or
// another, has the directory open.
var ErrLocked = errors.New("pebble: store directory is in use by another open store")

// Store is the embedded durable storage.Store on Pebble. All methods are
// safe for concurrent use (SetApplyHook excepted, as documented).
type Store struct {
	db      *pebble.DB
	lock    *pebble.Lock
	latches *latches
	guard   closeGuard
	// families is every family that has ever held a cell (DeleteRow visits
	// each). Invariant: a family is added only after the batch that
	// persisted its metadata key committed.
	families familySet
	hook     atomic.Pointer[storage.ApplyHook]
}

var (
	_ storage.Store       = (*Store)(nil)
	_ storage.Batcher     = (*Store)(nil)
	_ storage.Deferred    = (*Store)(nil)
	_ storage.Exclusive   = (*Store)(nil)
	_ storage.ApplyHooker = (*Store)(nil)
	_ storage.Counted     = (*Store)(nil)
	_ storage.Compacter   = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir. It fails with an
// error wrapping ErrLocked while another Store has dir open.
func Open(dir string, opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	db, err := pebble.Open(dir, opts.pebbleOptions(lock))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pebble: open %s: %w", dir, err), lock.Close())
	}
	s := &Store{db: db, lock: lock, latches: newLatches()}
	if err := s.init(); err != nil {
		return nil, errors.Join(fmt.Errorf("pebble: open %s: %w", dir, err), db.Close(), lock.Close())
	}
	return s, nil
}

// init checks the format marker (writing it into a new store) and loads
// the family registry.
func (s *Store) init() error {
	v, closer, err := s.db.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := s.db.Set(formatKey, []byte(formatVersion), pebble.Sync); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		ok := string(v) == formatVersion
		closer.Close()
		if !ok {
			return fmt.Errorf("unsupported format %q, want %q", v, formatVersion)
		}
	}
	return s.loadFamilies()
}

func (s *Store) loadFamilies() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: familyMetaPrefix, UpperBound: prefixEnd(nil, familyMetaPrefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		s.families.add(string(bytes.TrimPrefix(it.Key(), familyMetaPrefix)))
	}
	return it.Close()
}

// Exclusive reports true: the directory lock makes this process the
// store's only writer.
func (s *Store) Exclusive() bool { return true }

// SetApplyHook installs hook (nil removes it). The hook runs after a
// write's durable commit and before its row latches are released.
func (s *Store) SetApplyHook(hook storage.ApplyHook) {
	if hook == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&hook)
}

func (s *Store) callHook(row []byte, ms []storage.Mutation) {
	if h := s.hook.Load(); h != nil && len(ms) > 0 {
		(*h)(row, ms)
	}
}

// Close waits for the calls in flight, then closes pebble and releases the
// directory lock. Later calls return storage.ErrClosed.
func (s *Store) Close() error {
	if !s.guard.close() {
		return storage.ErrClosed
	}
	return errors.Join(s.db.Close(), s.lock.Close())
}

// familySet is a copy-on-write set of family names: lookups take no lock.
type familySet struct {
	mu    sync.Mutex // serializes add
	names atomic.Pointer[map[string]struct{}]
}

func (f *familySet) has(name string) bool {
	m := f.names.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[name]
	return ok
}

func (f *familySet) add(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.has(name) {
		return
	}
	m := make(map[string]struct{})
	if old := f.names.Load(); old != nil {
		for k := range *old {
			m[k] = struct{}{}
		}
	}
	m[name] = struct{}{}
	f.names.Store(&m)
}

// list returns the families; the caller must not modify the map.
func (f *familySet) list() map[string]struct{} {
	if m := f.names.Load(); m != nil {
		return *m
	}
	return nil
}

func familyMetaKey(family string) []byte {
	return append(append([]byte(nil), familyMetaPrefix...), family...)
}
