//go:build !unix

package runstatus

// Alive cannot tell on this platform; it assumes the process lives.
func Alive(pid int) bool { return pid > 0 }
