package pebble

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// ErrNotExist is returned by Open with Options.MustExist when the
// directory holds no store.
var ErrNotExist = errors.New("pebble: no store")

// ErrLocked is matched (errors.Is) by the *LockedError Open returns while
// another Store, in this process or another, has the directory open.
var ErrLocked = errors.New("pebble: store directory is in use by another open store")

// LockedError says who holds a store directory: errors.Is it ErrLocked
// and storage.ErrInUse. PID is 0 when the holder could not be learned (a
// store of this process, or a platform without the query).
type LockedError struct {
	Dir     string
	PID     int
	Command string
}

func (e *LockedError) Error() string {
	switch {
	case e.PID == os.Getpid():
		return fmt.Sprintf("pebble: store %s is already open in this process", e.Dir)
	case e.PID > 0 && e.Command != "":
		return fmt.Sprintf("pebble: store %s is in use by process %d (%s)", e.Dir, e.PID, e.Command)
	case e.PID > 0:
		return fmt.Sprintf("pebble: store %s is in use by process %d", e.Dir, e.PID)
	}
	return fmt.Sprintf("pebble: store %s is in use by another open store", e.Dir)
}

// Is makes errors.Is(err, ErrLocked) and errors.Is(err, storage.ErrInUse)
// true.
func (e *LockedError) Is(target error) bool {
	return target == ErrLocked || target == storage.ErrInUse
}

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
	space    *space
	// synced counts the batches committed durably (SyncedWrites).
	synced atomic.Uint64
	// group decides the log's wait between syncs (groupsync.go).
	group groupSync
	// pruner, if set, drops predicate selectors under the row latch
	// (SetPruner).
	pruner atomic.Pointer[Pruner]
	// stamper, if set, is the oracle of the process that owns the store:
	// one-phase commits take their timestamps from it (onephase.go).
	stamper atomic.Pointer[storage.Stamper]
}

// Pruner returns predicate without selectors that select nothing in row,
// as an index the apply hook keeps knows: it runs under row's latch, where
// the hook has seen every earlier write of the row (storage.Conditioned),
// so what it drops would have read nothing. It must be fast and must not
// call the store.
type Pruner func(row []byte, predicate storage.Filter) storage.Filter

// SetPruner installs p, which every conditional write of the store then
// runs on its predicate under the row latch before reading it (the
// server's lock index: a column's erased locks, deletion markers until a
// compaction, are not stepped over). Install it with the hook that keeps
// its index, before concurrent use.
func (s *Store) SetPruner(p Pruner) { s.pruner.Store(&p) }

// prune is the pruner's predicate for row, or predicate itself.
func (s *Store) prune(row []byte, predicate storage.Filter) storage.Filter {
	if p := s.pruner.Load(); p != nil && *p != nil && len(predicate) > 0 {
		return (*p)(row, predicate)
	}
	return predicate
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
	if opts.MustExist {
		if d, err := pebble.Peek(dir, opts.FS); err != nil || !d.Exists {
			return nil, fmt.Errorf("%w at %s", ErrNotExist, dir)
		}
	}
	if err := mkdirAllSynced(opts.FS, dir); err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, opts.FS)
	if err != nil {
		return nil, lockError(dir, opts.FS, err)
	}
	s := &Store{lock: lock, latches: newLatches()}
	s.group.delay = max(opts.SyncDelay, 0)
	s.space = newSpace(opts.FS, dir, opts.DiskReserve, opts.Logger)
	po := opts.pebbleOptions(lock, func(msg string) { s.guard.fail(errors.New(msg)) })
	if s.group.delay > 0 {
		po.WALMinSyncInterval = s.group.interval
	}
	if s.space.size > 0 {
		po.FS = vfs.OnDiskFull(po.FS, s.space.diskFull)
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pebble: open %s: %w", dir, err), lock.Close())
	}
	s.db = db
	s.space.setNeed(func() int64 {
		m := db.Metrics()
		return int64(min(m.Compact.EstimatedDebt, math.MaxInt64/2)) + max(m.Compact.InProgressBytes, 0)
	})
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
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: familyMetaPrefix, UpperBound: storage.AppendPrefixEnd(nil, familyMetaPrefix)})
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

// SetApplyHook implements storage.ApplyHooker: one hook at a time. The
// hook runs after a write is visible (and, for a durable call, durable)
// and before its row latches are released.
func (s *Store) SetApplyHook(hook storage.ApplyHook) (func(), error) {
	if hook == nil {
		return nil, fmt.Errorf("%w: nil apply hook", storage.ErrInvalidArgument)
	}
	h := &hook
	if !s.hook.CompareAndSwap(nil, h) {
		return nil, fmt.Errorf("pebble: apply hook: %w (another client keeps an index of this store)", storage.ErrInUse)
	}
	return func() { s.hook.CompareAndSwap(h, nil) }, nil
}

func (s *Store) callHook(row []byte, ms []storage.Mutation) {
	if h := s.hook.Load(); h != nil && len(ms) > 0 {
		(*h)(row, ms)
	}
}

// Close waits for the calls in flight, flushes the memtable and lets the
// compactions that calls for run (up to closeSettle; unless the store
// failed), closes pebble and releases the directory lock. Later calls
// return storage.ErrClosed.
func (s *Store) Close() error {
	if !s.guard.close() {
		return storage.ErrClosed
	}
	var flushErr error
	if s.guard.failure() == nil {
		// Flushed now, the memtable need not be replayed from the log (and
		// flushed) by the next Open, which would wait for it; and the
		// compactions this process's writes called for run now, not in the
		// next process to open the store (pebble's Open waits for any that
		// starts while it opens).
		flushErr = s.db.Flush()
		s.settleCompactions(closeSettle)
		s.compactAfterBulk()
	}
	return errors.Join(flushErr, s.db.Close(), s.lock.Close())
}

// bulkWritten is how much a process must have written to the log for
// Close to compact the whole store (compactAfterBulk); closeCompact
// bounds that compaction.
const (
	bulkWritten  = 32 << 20
	closeCompact = 10 * time.Second
)

// compactAfterBulk compacts the whole keyspace when this process wrote
// much (a bulk load, a first index run) and left level 0 holding tables.
// Level 0 left just under its threshold makes the next short process's
// one small flush set off a compaction of all of it, which that process
// then waits for at Close: a cost that belongs to the process that wrote
// the data, which pays it here instead (bounded by closeCompact).
func (s *Store) compactAfterBulk() {
	m := s.db.Metrics()
	if m.WAL.BytesWritten < bulkWritten || m.Levels[0].Sublevels == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeCompact)
	defer cancel()
	_ = s.db.Compact(ctx, []byte{0x00}, []byte{0xff}, true)
}

// closeSettle bounds how long Close lets compactions run.
const closeSettle = 5 * time.Second

// settleCompactions waits, at most max, until no compaction runs and level
// 0's score does not call for one. (Only level 0's: a lower level's score
// can stay at or above 1 with no compaction pebble would pick.)
func (s *Store) settleCompactions(max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		m := s.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Levels[0].Score < 1 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
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

// mkdirAllSynced creates dir and its missing parents, syncing the parent
// of each directory it creates: without that, a power cut can take a new
// store's directory entry back, and with it every write acknowledged in
// the store (pebble syncs only the store directory's own entry).
func mkdirAllSynced(fs vfs.FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := syncDir(fs, filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
