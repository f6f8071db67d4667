//go:build !unix

package docindex

import "io/fs"

// statOf is the Stat of a file: size and modification time (no inode on
// this platform).
func statOf(info fs.FileInfo) Stat {
	return Stat{Size: info.Size(), ModTime: info.ModTime().UnixNano()}
}
