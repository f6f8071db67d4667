package verify

import "golang.org/x/sys/unix"

// now reads CLOCK_MONOTONIC in nanoseconds: one clock every process of
// the machine shares, so the events that several client processes record
// can be ordered in real time. (Go's monotonic readings are relative to
// each process's start and cannot be compared across processes.)
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("verify: clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}
