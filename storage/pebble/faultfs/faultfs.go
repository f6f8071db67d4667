// Package faultfs is a vfs.FS for power-loss tests of the Pebble store: it
// wraps another filesystem (usually vfs.NewCrashableMem, whose CrashClone
// is the power cut) and can hold the syncs of the write-ahead log, so a
// test can act while a commit is published but not yet durable, and then
// let them finish or fail (a failed fsync).
//
// Only files whose name ends in ".log" (pebble's WAL segments) are gated;
// every other call passes through.
package faultfs

import (
	"context"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS wraps a vfs.FS. Safe for concurrent use.
type FS struct {
	vfs.FS
	mu struct {
		sync.Mutex
		// gate is nil while syncs pass; otherwise they wait for it to close.
		gate chan struct{}
		// failed, once set, is returned by every later WAL sync (a failed
		// fsync leaves the file in an unknown state: it never heals).
		failed error
		// waiting counts syncs blocked on gate; arrived is closed (and
		// replaced) whenever one starts waiting.
		waiting int
		arrived chan struct{}
	}
}

// New wraps inner.
func New(inner vfs.FS) *FS {
	f := &FS{FS: inner}
	f.mu.arrived = make(chan struct{})
	return f
}

// Hold makes later WAL syncs wait until Release.
func (f *FS) Hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.gate == nil {
		f.mu.gate = make(chan struct{})
	}
}

// Release lets the held syncs go on. With a nil err they sync; otherwise
// they, and every later WAL sync, fail with err without syncing.
func (f *FS) Release(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil && f.mu.failed == nil {
		f.mu.failed = err
	}
	if f.mu.gate != nil {
		close(f.mu.gate)
		f.mu.gate = nil
	}
}

// AwaitHeld waits until at least n syncs are held.
func (f *FS) AwaitHeld(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		waiting, arrived := f.mu.waiting, f.mu.arrived
		f.mu.Unlock()
		if waiting >= n {
			return nil
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pass blocks a WAL sync while the gate is held and returns the failure
// it must report, if any.
func (f *FS) pass() error {
	f.mu.Lock()
	gate := f.mu.gate
	if gate != nil {
		f.mu.waiting++
		close(f.mu.arrived)
		f.mu.arrived = make(chan struct{})
	}
	f.mu.Unlock()
	if gate != nil {
		<-gate
		f.mu.Lock()
		f.mu.waiting--
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.failed
}

func (f *FS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &walFile{File: file, fs: f}, nil
}

// Create implements vfs.FS.
func (f *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	return f.wrap(name, file, err)
}

// OpenReadWrite implements vfs.FS.
func (f *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, category, opts...)
	return f.wrap(name, file, err)
}

// ReuseForWrite implements vfs.FS.
func (f *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	return f.wrap(newname, file, err)
}

// walFile gates the syncs of one WAL segment.
type walFile struct {
	vfs.File
	fs *FS
}

func (w *walFile) Sync() error {
	if err := w.fs.pass(); err != nil {
		return err
	}
	return w.File.Sync()
}

func (w *walFile) SyncData() error {
	if err := w.fs.pass(); err != nil {
		return err
	}
	return w.File.SyncData()
}

func (w *walFile) SyncTo(length int64) (bool, error) {
	if err := w.fs.pass(); err != nil {
		return false, err
	}
	return w.File.SyncTo(length)
}
