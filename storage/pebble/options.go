package pebble

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// Defaults for the zero Options.
const (
	DefaultCacheSize    = 64 << 20
	DefaultMemTableSize = 8 << 20
	maxMemTableSize     = 4<<30 - 1
	maxSyncDelay        = 10 * time.Millisecond
)

// Options configures a Store. The zero value is usable. No option trades
// durability for speed: every durable call is synced to the WAL before it
// returns (the storage.Deferred variants, which the caller picks per write,
// are made durable by the next synced write).
type Options struct {
	// CacheSize is the size in bytes of the block cache. 0 means
	// DefaultCacheSize.
	CacheSize int64
	// MemTableSize is the size in bytes of one memtable; pebble keeps up to
	// two. 0 means DefaultMemTableSize.
	MemTableSize uint64
	// Logger receives pebble's log lines. nil means slog.Default().
	Logger *slog.Logger
	// FS is the filesystem the store lives on. nil means the operating
	// system's. Power-loss tests pass vfs.NewCrashableMem() and reopen its
	// CrashClone.
	FS vfs.FS
	// MustExist makes Open fail with ErrNotExist, creating nothing (not
	// even the directory), when dir holds no store.
	MustExist bool
	// DiskReserve is the disk space, in bytes, the store keeps for the
	// writes that free space (storage.Reserver): while less is free it
	// refuses every other write with storage.ErrNoSpace. 0 means
	// DefaultDiskReserve; negative, none. It is at least two memtables:
	// what the writes that free space need first is a flush. Size it to
	// the compactions of a large store too (say 1% of the disk): freed
	// space comes back once a compaction rewrote the files, and a
	// compaction writes its output before it drops its input.
	DiskReserve int64
	// SyncDelay is how long the log waits after a sync before it starts
	// the next while many writers commit at once (8 or more commits per
	// sync, on average over the recent syncs), so that more of them share it (groupsync.go): a higher
	// rate of synced writes for up to this much more latency each. A
	// writer alone never waits. 0 means DefaultSyncDelay; negative, no
	// wait.
	SyncDelay time.Duration
}

// EnsureDefaults fills the zero fields with defaults.
func (o *Options) EnsureDefaults() {
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.DiskReserve == 0 {
		o.DiskReserve = DefaultDiskReserve
	}
	if o.SyncDelay == 0 {
		o.SyncDelay = DefaultSyncDelay
	}
	if o.DiskReserve > 0 {
		o.DiskReserve = max(o.DiskReserve, 2*int64(o.MemTableSize))
	}
}

// Validate reports options out of range, wrapping storage.ErrInvalidArgument.
func (o *Options) Validate() error {
	if o.CacheSize < 0 {
		return fmt.Errorf("%w: negative CacheSize %d", storage.ErrInvalidArgument, o.CacheSize)
	}
	if o.MemTableSize > maxMemTableSize {
		return fmt.Errorf("%w: MemTableSize %d exceeds %d", storage.ErrInvalidArgument, o.MemTableSize, uint64(maxMemTableSize))
	}
	if o.SyncDelay > maxSyncDelay {
		return fmt.Errorf("%w: SyncDelay %v exceeds %v", storage.ErrInvalidArgument, o.SyncDelay, maxSyncDelay)
	}
	return nil
}

// pebbleOptions translates validated, defaulted options; fatal runs when
// pebble reports an error it cannot survive.
func (o *Options) pebbleOptions(lock *pebble.Lock, fatal func(string)) *pebble.Options {
	po := &pebble.Options{
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Comparer:           cellComparer,
		Logger:             slogLogger{l: o.Logger, fatal: fatal},
		Lock:               lock,
		FS:                 o.FS,
	}
	// A store is often opened by short processes (a CLI run, a rerun of
	// the index job) that each flush a little at Close and pay for any
	// compaction running then (pebble's Close waits for it, and its Open
	// for one that starts while it opens). Level 0 compacts at 12
	// sublevels rather than pebble's 4, so such a process pays for one
	// about every tenth run instead of every third; point reads of a
	// column no table holds still skip level 0's tables by their bloom
	// filters. Writes stall at 36 sublevels, above it. Read-triggered
	// compactions are off: a read-heavy short run would start them and
	// then wait for them at Close.
	po.L0CompactionThreshold = 12
	po.L0StopWritesThreshold = 36
	po.Experimental.ReadSamplingMultiplier = -1
	// Bloom filters over a cell's column (the key without its timestamp;
	// cellComparer.Split): a point Get and a column's seek (SeekPrefixGE)
	// skip every table that holds no version of the column.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	po.Experimental.SpanPolicyFunc = familySpans
	return po
}

// familySpans ends every sstable that flushes and compactions write at a
// family's end, so no table holds two families: compacting one family's
// keyspace (CompactFamily) rewrites that family's tables only, and a
// family of small, often deleted cells (notifications) does not drag the
// data's tables into its compactions.
func familySpans(start []byte) (pebble.SpanPolicy, []byte, error) {
	if len(start) == 0 || start[0] == escape { // metadata
		return pebble.SpanPolicy{}, []byte{termByte}, nil
	}
	if i := bytes.IndexByte(start, escape); i >= 0 {
		return pebble.SpanPolicy{}, appendFamilyEnd(nil, string(start[:i])), nil
	}
	return pebble.SpanPolicy{}, nil, nil
}

// slogLogger adapts slog to pebble's Logger.
type slogLogger struct {
	l *slog.Logger
	// fatal, if set, runs before Fatalf panics (the store records its
	// failure there).
	fatal func(msg string)
}

// Infof logs at Debug: pebble's informational lines (WAL recovery, file
// counts) are noise to a user of the store.
func (s slogLogger) Infof(format string, args ...any) {
	s.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// fatalPanic is what Fatalf panics with. commitBatch recovers it on the
// committing goroutine: pebble calls Fatalf there when a commit fails (a
// failed WAL write or sync) and, were Fatalf to return, would go on as if
// the commit had succeeded.
type fatalPanic struct{ msg string }

// Fatalf logs, lets the store record its failure, and panics: pebble calls
// it on errors it cannot survive and does not expect it to return.
func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Log(context.Background(), slog.LevelError+4, msg, "component", "pebble")
	if s.fatal != nil {
		s.fatal(msg)
	}
	panic(fatalPanic{msg: "pebble: fatal: " + msg})
}
