//go:build !linux

package etcdtest

import "syscall"

// sysProcAttr has no Pdeathsig outside Linux: the child then dies when
// its stdin ends, which needs it to be running (not paused).
func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped cannot watch the process's state outside Linux: the signal
// has been sent, which is all it can tell.
func waitStopped(pid int, stopped bool, exited <-chan struct{}) error { return nil }
