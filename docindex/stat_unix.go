//go:build unix

package docindex

import (
	"io/fs"
	"syscall"
)

// statOf is the Stat of a file: size, modification time and inode.
func statOf(info fs.FileInfo) Stat {
	st := Stat{Size: info.Size(), ModTime: info.ModTime().UnixNano()}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.Inode = uint64(sys.Ino)
	}
	return st
}
