package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNotScratch: a directory PrepareDir was given holds what bench did
// not make, which it never deletes.
var ErrNotScratch = errors.New("bench: not a scratch directory")

// marker is the file that marks a directory bench made: PrepareDir
// deletes the contents of such a directory, and of no other.
const marker = ".percolator-bench"

// PrepareDir prepares a scratch directory: a new temporary one (removed
// by cleanup) if dir is "", else dir if it is new, empty, or made by an
// earlier run (its contents then deleted; cleanup leaves it). Any other
// directory is refused (ErrNotScratch): bench never deletes what it did
// not create.
func PrepareDir(dir string) (string, func(), error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "percolator-bench-")
		if err != nil {
			return "", nil, err
		}
		return tmp, func() { _ = os.RemoveAll(tmp) }, nil
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = os.MkdirAll(dir, 0o755)
	case err != nil:
		return "", nil, err
	case len(entries) == 0:
	case hasMarker(entries):
		err = clearDir(dir, entries)
	default:
		return "", nil, fmt.Errorf("%w: %s is not empty and was not made by bench", ErrNotScratch, dir)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, marker), []byte("made by percolator bench; its contents are replaced by the next bench\n"), 0o644)
	}
	return dir, func() {}, err
}

func hasMarker(entries []os.DirEntry) bool {
	for _, e := range entries {
		if e.Name() == marker && e.Type().IsRegular() {
			return true
		}
	}
	return false
}

// clearDir deletes the entries of a directory bench made.
func clearDir(dir string, entries []os.DirEntry) error {
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
