//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package oracle

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile opens (creating) path and takes an exclusive, non-blocking flock
// on it. flock locks belong to the open file description, so a second
// lockFile of the same path fails within one process as well as across
// processes, and the kernel drops the lock when the process dies, kill -9
// included.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("oracle: open lock file: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, nil
	}
	_ = f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	return nil, fmt.Errorf("oracle: lock %s: %w", path, err)
}
