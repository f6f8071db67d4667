package pebble

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockError turns a failure to lock dir into what happened: a
// *LockedError naming the holder when another store has it open, the real
// cause (a permission error, a missing parent) otherwise.
func lockError(dir string, fsys vfs.FS, err error) error {
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pathErr):
		// Creating or opening the lock file failed: not a held lock.
		return fmt.Errorf("pebble: open %s: %w", dir, err)
	case strings.Contains(err.Error(), "held by current process"):
		return &LockedError{Dir: dir, PID: os.Getpid()}
	case fsys != vfs.Default:
		return &LockedError{Dir: dir}
	}
	pid := lockHolder(fsys.PathJoin(dir, "LOCK"))
	return &LockedError{Dir: dir, PID: pid, Command: commandOf(pid)}
}

// commandOf returns the command line of process pid, or "".
func commandOf(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
