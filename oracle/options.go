package oracle

import "fmt"

// MaxTimestamp is the largest timestamp the oracle hands out. It keeps
// ts*1000 below 2^63, so a Bigtable backend can store a timestamp as a cell
// time in microseconds that survives Bigtable's millisecond rounding.
const MaxTimestamp uint64 = (1<<63)/1000 - 1

// DefaultWindow is the default AllocatorOptions.Window.
//
// The background extension starts when less than Window/2 remains, so
// Window/2 = 2^21 timestamps must outlast one fsync: at 2,000,000
// timestamps/s that is one second, far above a disk's fsync latency. A
// restart burns at most Window timestamps, so MaxTimestamp allows about two
// billion restarts.
const DefaultWindow uint64 = 1 << 22

// AllocatorOptions configures an Allocator. The zero value is usable.
type AllocatorOptions struct {
	// Window is how far ahead of the next timestamp the persisted mark is
	// set when it is extended. The mark is extended, in the background,
	// once less than Window/2 timestamps remain below it. A larger window
	// means fewer fsyncs and more timestamps skipped by a restart.
	// Zero means DefaultWindow.
	Window uint64

	// start, when above the persisted mark, is the first timestamp handed
	// out. Test knob: it lets tests start near MaxTimestamp.
	start uint64
	// beforeExtend, if set, runs in the extension goroutine before each
	// background mark write; an error fails that write. Test knob: it
	// blocks or fails the disk.
	beforeExtend func() error
}

// EnsureDefaults fills in zero fields with their defaults.
func (o *AllocatorOptions) EnsureDefaults() {
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
}

// Validate reports whether the options are usable, after EnsureDefaults.
func (o *AllocatorOptions) Validate() error {
	if o.Window < 2 || o.Window > MaxTimestamp {
		return fmt.Errorf("%w: Window %d not in [2, MaxTimestamp]", ErrInvalidArgument, o.Window)
	}
	if o.start > MaxTimestamp+1 {
		return fmt.Errorf("%w: start %d above MaxTimestamp+1", ErrInvalidArgument, o.start)
	}
	return nil
}
