//go:build unix

package pebble

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// lockHolder returns the pid of the process holding the fcntl lock on the
// file at path (what pebble's directory lock takes), or 0.
func lockHolder(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	spec := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &spec); err != nil || spec.Type == unix.F_UNLCK {
		return 0
	}
	return int(spec.Pid)
}
