package oracle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// The mark file is the persister of OpenAllocator(path): an allocator
// whose high-water mark lives in a file of its own, beside no data. Only
// `percolator bench`'s oracle figure (and this package's tests) use one;
// the DB and the server keep their mark in the store they serve
// (storemark.go), and an elected oracle in etcd (external.go, oracle/etcd).
//
// The mark file holds the persisted high-water mark: every timestamp ever
// handed out from this path is below it. Layout, 20 bytes:
//
//	[0:8)   magic "ptsmark1"
//	[8:16)  mark, big-endian uint64
//	[16:20) CRC-32C of bytes [0:16), big-endian
//
// It is replaced atomically (temp file, fsync, rename, fsync dir), so a
// reader sees the old mark or the new one, never a mix; anything else found
// there is ErrCorruptMark, never a silent reset to zero.
const (
	markMagic = "ptsmark1"
	markSize  = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeMark(mark uint64) []byte {
	buf := make([]byte, markSize)
	copy(buf, markMagic)
	binary.BigEndian.PutUint64(buf[8:16], mark)
	binary.BigEndian.PutUint32(buf[16:20], crc32.Checksum(buf[:16], castagnoli))
	return buf
}

func decodeMark(buf []byte) (uint64, error) {
	switch {
	case len(buf) != markSize:
		return 0, fmt.Errorf("%w: size %d, want %d", ErrCorruptMark, len(buf), markSize)
	case !bytes.Equal(buf[:8], []byte(markMagic)):
		return 0, fmt.Errorf("%w: bad magic %q", ErrCorruptMark, buf[:8])
	case binary.BigEndian.Uint32(buf[16:20]) != crc32.Checksum(buf[:16], castagnoli):
		return 0, fmt.Errorf("%w: checksum mismatch", ErrCorruptMark)
	}
	mark := binary.BigEndian.Uint64(buf[8:16])
	if mark > MaxTimestamp+1 {
		return 0, fmt.Errorf("%w: mark %d above MaxTimestamp+1", ErrCorruptMark, mark)
	}
	return mark, nil
}

// markFile is the persisted mark at path, locked for this process by an
// flock on path+".lock". The lock is on a separate file because the mark
// file itself is replaced by rename, which would leave a lock on the old
// inode.
//
// Concurrency: write must not run concurrently with itself; the Allocator
// runs at most one extension at a time.
type markFile struct {
	path string
	lock *os.File
}

// openMarkFile locks path and reads its mark; a missing file reads as 0.
func openMarkFile(path string) (*markFile, uint64, error) {
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, 0, err
	}
	m := &markFile{path: path, lock: lock}
	mark, err := m.read()
	if err != nil {
		_ = m.close()
		return nil, 0, err
	}
	return m, mark, nil
}

func (m *markFile) read() (uint64, error) {
	buf, err := os.ReadFile(m.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("oracle: read mark: %w", err)
	}
	mark, err := decodeMark(buf)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", m.path, err)
	}
	return mark, nil
}

// write durably replaces the mark. When it returns nil the new mark
// survives a crash or power loss.
func (m *markFile) write(mark uint64) error {
	tmp := m.path + ".tmp"
	if err := writeSynced(tmp, encodeMark(mark)); err != nil {
		return fmt.Errorf("oracle: write mark: %w", err)
	}
	if err := os.Rename(tmp, m.path); err != nil {
		return fmt.Errorf("oracle: write mark: %w", err)
	}
	if err := syncDir(filepath.Dir(m.path)); err != nil {
		return fmt.Errorf("oracle: write mark: %w", err)
	}
	return nil
}

// usable implements persister: a locked mark file is always usable.
func (m *markFile) usable() error { return nil }

func (m *markFile) close() error {
	// Closing the descriptor releases the flock.
	return m.lock.Close()
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
