package history

import "golang.org/x/sys/unix"

// Now reads CLOCK_MONOTONIC in nanoseconds, the clock of every Op.Time
// and Lease time: one clock every process of the machine shares, so the
// events that several client processes record can be ordered in real
// time. (Go's monotonic readings are relative to each process's start and
// cannot be compared across processes.)
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("history: clock_gettime(CLOCK_MONOTONIC): " + err.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}
