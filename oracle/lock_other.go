//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package oracle

import (
	"errors"
	"fmt"
	"os"
)

// lockFile is not implemented on this platform: without a lock, two
// allocators on one path could hand out the same timestamps.
func lockFile(path string) (*os.File, error) {
	return nil, fmt.Errorf("oracle: lock %s: %w", path, errors.ErrUnsupported)
}
