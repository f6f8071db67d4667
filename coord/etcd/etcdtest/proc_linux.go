package etcdtest

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel kill the child when the thread that
// started it ends, which child.start makes the end of the test process.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until process pid is stopped (SIGSTOP took effect),
// or runs again, as stopped says; it gives up if the process exits, or
// after a bound that only a hang reaches.
func waitStopped(pid int, stopped bool, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, err := procState(pid)
		if err != nil {
			return err
		}
		if (state == 'T') == stopped {
			return nil
		}
		select {
		case <-exited:
			return ErrNotRunning
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: the member's state is %q 10s after the signal", state)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState returns the state letter of process pid (R, S, T, Z, ...).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("etcdtest: %w", err)
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("etcdtest: unexpected /proc/%d/stat: %q", pid, b)
	}
	return b[i+2], nil
}
