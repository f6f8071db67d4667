package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// DefaultDiskReserve is the disk space a store keeps in reserve for the
// writes that free space (Options.DiskReserve).
const DefaultDiskReserve = 64 << 20

// reserveName is the file, in the store's directory, that holds the
// reserve: its blocks allocated, so that no other file can take them.
const reserveName = "percolator-reserve"

// spaceCheckEvery bounds how stale the disk's free space a write is judged
// by may be.
const spaceCheckEvery = time.Second

// space keeps the store's reserve of disk space (doc.go, "A nearly full
// disk"). While the disk's free space is below the reserve's size, plus
// what the store's compactions still have to write, the store is low: the reserve file is removed, so its space is free for the
// writes that free space (storage.WithReserve), and every other write is
// refused with storage.ErrNoSpace. It stops being low, and takes its
// reserve back, once three times the reserve's size is free (more after a
// full disk: see diskFull). A write that
// meets a full disk anyway (ENOSPC: another process filled it between two
// checks) makes it low at once and is retried after the reserve went
// (vfs.OnDiskFull), so a full disk never fails the store.
type space struct {
	fs    vfs.FS // unwrapped: the reserve is managed beside pebble's writes
	dir   string
	size  int64 // 0: no reserve, never low
	every time.Duration
	log   *slog.Logger

	low  atomic.Bool
	next atomic.Int64 // when to read the free space again (unix nanos)
	// need, once the store is open, is the disk space the LSM's
	// compactions still have to write (pebble's estimated compaction
	// debt and the compactions in progress): it counts as used, so the
	// store goes low while its compactions can still finish.
	need atomic.Pointer[func() int64]

	mu     sync.Mutex
	held   bool  // the reserve file exists
	avail  int64 // the free space last read, -1 unknown
	resume int64 // the free space at which a low store takes its reserve back
}

func newSpace(fs vfs.FS, dir string, size int64, log *slog.Logger) *space {
	s := &space{fs: fs, dir: dir, size: max(size, 0), every: spaceCheckEvery, log: log, avail: -1}
	s.resume = 3 * s.size
	if s.size == 0 {
		// Kept by an earlier open with a reserve: its space is not held.
		if err := fs.Remove(s.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("pebble: removing the disk reserve", "file", s.path(), "err", err)
		}
		return s
	}
	if _, err := fs.Stat(s.path()); err == nil {
		s.held = true
	}
	s.mu.Lock()
	s.checkLocked(time.Now())
	s.mu.Unlock()
	return s
}

func (s *space) path() string { return s.fs.PathJoin(s.dir, reserveName) }

// isLow reports whether the disk is nearly full, reading its free space
// again when the last reading is older than every.
func (s *space) isLow() bool {
	if s.size == 0 {
		return false
	}
	if now := time.Now(); now.UnixNano() >= s.next.Load() {
		s.mu.Lock()
		if now.UnixNano() >= s.next.Load() {
			s.checkLocked(now)
		}
		s.mu.Unlock()
	}
	return s.low.Load()
}

// diskFull is vfs.OnDiskFull's callback: a write met ENOSPC. Pebble's
// writes wait while it runs, and the one that met it is retried after.
// What was free then did not suffice for pebble's write (a flush's or a
// compaction's file may be large): the store takes its reserve back only
// once that much more than usual is free.
func (s *space) diskFull() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if du, err := s.fs.GetDiskUsage(s.dir); err == nil {
		s.avail = int64(min(du.AvailBytes, math.MaxInt64))
		s.resume = max(s.resume, s.avail+3*s.size)
	}
	s.goLowLocked("a write found the disk full")
}

// checkLocked reads the free space and moves between low and not low.
func (s *space) checkLocked(now time.Time) {
	s.next.Store(now.Add(s.every).UnixNano())
	du, err := s.fs.GetDiskUsage(s.dir)
	if err != nil {
		return // unknown (a filesystem that cannot say): as it was
	}
	s.avail = int64(min(du.AvailBytes, math.MaxInt64))
	var need int64
	if f := s.need.Load(); f != nil {
		need = max((*f)(), 0)
	}
	switch {
	case !s.low.Load() && s.avail < s.size+need:
		s.goLowLocked("the disk is nearly full")
	case !s.held && s.avail >= s.resume+need:
		if err := s.takeLocked(); err != nil {
			s.log.Warn("pebble: making the disk reserve", "file", s.path(), "err", err)
			return
		}
		s.resume = 3 * s.size
		if s.low.Swap(false) {
			s.log.Info("pebble: disk space is back: writes are accepted again, the reserve taken back",
				"free_bytes", s.avail, "reserve_bytes", s.size)
		}
	}
}

// setNeed installs the store's measure of the space its compactions
// still need (need's comment).
func (s *space) setNeed(f func() int64) { s.need.Store(&f) }

// goLowLocked refuses writes from now on and frees the reserve.
func (s *space) goLowLocked(why string) {
	if !s.low.Swap(true) {
		s.log.Warn("pebble: "+why+": refusing writes but the garbage collector's, which may use the reserve",
			"free_bytes", s.avail, "reserve_bytes", s.size, "dir", s.dir)
	}
	if s.held {
		if err := s.fs.Remove(s.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("pebble: releasing the disk reserve", "file", s.path(), "err", err)
			return
		}
		s.held = false
		s.avail += s.size
	}
}

// takeLocked makes the reserve file, its blocks allocated.
func (s *space) takeLocked() error {
	f, err := s.fs.Create(s.path(), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = f.Preallocate(0, s.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.fs.Remove(s.path())
		return err
	}
	s.held = true
	s.avail -= s.size
	return nil
}

// admit refuses a write while the disk is nearly full, unless ctx marks it
// as one that may use the reserve.
func (s *space) admit(ctx context.Context) error {
	if !s.isLow() || storage.UsesReserve(ctx) {
		return nil
	}
	s.mu.Lock()
	avail, resume := s.avail, s.resume
	s.mu.Unlock()
	return fmt.Errorf("%w: %s: %d bytes free, not enough beside the %d bytes kept for garbage collection; writes resume once %d are free (collect garbage, or free space)",
		storage.ErrNoSpace, s.dir, max(avail, 0), s.size, resume)
}

// LowOnSpace implements storage.Reserver.
func (s *Store) LowOnSpace() bool { return s.space.isLow() }

var _ storage.Reserver = (*Store)(nil)
