//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package oracle

import (
	"errors"
	"fmt"
	"os"
)

// lockFile refuses to open a persisted allocator where the platform has no
// flock: without the lock, two allocators on one path could hand out the
// same timestamps, so the allocator is unavailable rather than unsafe.
func lockFile(path string) (*os.File, error) {
	return nil, fmt.Errorf("oracle: lock %s: %w", path, errors.ErrUnsupported)
}
