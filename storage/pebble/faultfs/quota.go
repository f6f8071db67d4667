package faultfs

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Quota is a vfs.FS whose disk holds limit bytes: a write or a
// preallocation that would take the files' bytes past it fails with
// ENOSPC, as a full disk's does, and GetDiskUsage reports what is left.
// A file's bytes are the most it was written to, or preallocated; they
// come back when it is removed. Fill takes bytes away as another
// process's files would. Safe for concurrent use.
type Quota struct {
	vfs.FS
	mu    sync.Mutex
	limit int64
	other int64            // bytes Fill took
	files map[string]int64 // name → bytes
}

// NewQuota wraps inner with a disk of limit bytes.
func NewQuota(inner vfs.FS, limit int64) *Quota {
	return &Quota{FS: inner, limit: limit, files: map[string]int64{}}
}

// Fill takes n more bytes of the disk (negative: gives them back).
func (q *Quota) Fill(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.other += n
}

// Used is the bytes taken: the files' and Fill's.
func (q *Quota) Used() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.usedLocked()
}

func (q *Quota) usedLocked() int64 {
	n := q.other
	for _, b := range q.files {
		n += b
	}
	return n
}

// grow makes name's bytes at least end, or fails with ENOSPC.
func (q *Quota) grow(name string, end int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if cur := q.files[name]; end > cur {
		if q.usedLocked()+end-cur > q.limit {
			return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
		}
		q.files[name] = end
	}
	return nil
}

// GetDiskUsage implements vfs.FS: the limit and what is left of it.
func (q *Quota) GetDiskUsage(string) (vfs.DiskUsage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	used := q.usedLocked()
	return vfs.DiskUsage{AvailBytes: uint64(max(q.limit-used, 0)), TotalBytes: uint64(q.limit), UsedBytes: uint64(used)}, nil
}

func (q *Quota) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &quotaFile{File: f, q: q, name: name}, nil
}

// Create implements vfs.FS.
func (q *Quota) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := q.FS.Create(name, category)
	if err == nil {
		q.mu.Lock()
		q.files[name] = 0
		q.mu.Unlock()
	}
	return q.wrap(name, f, err)
}

// OpenReadWrite implements vfs.FS.
func (q *Quota) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := q.FS.OpenReadWrite(name, category, opts...)
	return q.wrap(name, f, err)
}

// ReuseForWrite implements vfs.FS: the file keeps its bytes, renamed.
func (q *Quota) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := q.FS.ReuseForWrite(oldname, newname, category)
	if err == nil {
		q.move(oldname, newname)
	}
	return q.wrap(newname, f, err)
}

// Rename implements vfs.FS.
func (q *Quota) Rename(oldname, newname string) error {
	err := q.FS.Rename(oldname, newname)
	if err == nil {
		q.move(oldname, newname)
	}
	return err
}

func (q *Quota) move(oldname, newname string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.files[newname] = q.files[oldname]
	delete(q.files, oldname)
}

// Remove implements vfs.FS: the file's bytes come back.
func (q *Quota) Remove(name string) error {
	err := q.FS.Remove(name)
	if err == nil || errors.Is(err, syscall.ENOENT) {
		q.mu.Lock()
		delete(q.files, name)
		q.mu.Unlock()
	}
	return err
}

// quotaFile counts one file's bytes.
type quotaFile struct {
	vfs.File
	q    *Quota
	name string
	mu   sync.Mutex
	off  int64 // the offset of the next Write
}

func (f *quotaFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.q.grow(f.name, f.off+int64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.q.grow(f.name, off+int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *quotaFile) Preallocate(off, length int64) error {
	if err := f.q.grow(f.name, off+length); err != nil {
		return err
	}
	return f.File.Preallocate(off, length)
}
