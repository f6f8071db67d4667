// Package heapfloor keeps the garbage collector from running while the
// heap is small. The runtime starts a cycle when the heap has grown by
// GOGC percent over what the last cycle left live, and at 4 MiB at the
// least. A server whose live Go heap is a few MiB (built with cgo,
// pebble keeps its memtables and block cache outside it) and that
// allocates tens of MiB
// a second then collects many times a second, spending more CPU on the
// collector than on many of its calls. Raising GOGC alone would scale
// the peak of a large heap too; a floor leaves that alone.
//
// Invariant: while a Floor runs, the GC percent is the one the process
// started with (GOGC), or higher where needed for the heap goal to reach
// the floor, as of the last reading of the live heap; once stopped, it
// is the one the process started with. A memory limit (GOMEMLIMIT)
// still bounds the heap: the runtime collects harder near it whatever
// the percent.
package heapfloor

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how often a Floor reads the live heap.
const Interval = time.Second

// maxPercent bounds the GC percent a Floor sets, for a live heap of a
// few bytes.
const maxPercent = 1_000_000

const liveMetric = "/gc/heap/live:bytes"

// Floor keeps the heap goal at or above a size.
type Floor struct {
	floor    uint64
	base     int // the GC percent the process started with
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// running is set while a Floor runs. The GC percent is the process's,
// so one Floor at a time sets it: two would each take the other's
// percent for the one to restore.
var running atomic.Bool

// Start keeps the heap goal at floor bytes or more until Stop, reading
// the live heap every interval. With the collector off (GOGC=off), or
// while another Floor runs, it changes nothing.
func Start(floor uint64, interval time.Duration) *Floor {
	f := &Floor{floor: floor, stop: make(chan struct{}), done: make(chan struct{})}
	if !running.CompareAndSwap(false, true) {
		close(f.done)
		return f
	}
	if f.base = CurrentPercent(); f.base < 0 {
		running.Store(false)
		close(f.done)
		return f
	}
	go f.run(interval)
	return f
}

// Stop stops f and restores the GC percent the process started with.
// It may be called more than once.
func (f *Floor) Stop() {
	f.stopOnce.Do(func() { close(f.stop) })
	<-f.done
}

func (f *Floor) run(interval time.Duration) {
	defer close(f.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	sample := []metrics.Sample{{Name: liveMetric}}
	set := f.base
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if p := Percent(f.base, f.floor, sample[0].Value.Uint64()); p != set {
				debug.SetGCPercent(p)
				set = p
			}
		}
		select {
		case <-f.stop:
			debug.SetGCPercent(f.base)
			running.Store(false)
			return
		case <-t.C:
		}
	}
}

// CurrentPercent is the GC percent in force (GOGC, or what
// debug.SetGCPercent set); negative when the collector is off.
func CurrentPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	p := s[0].Value.Uint64()
	if p > maxPercent*10 {
		return -1 // off reads as the largest percent
	}
	return int(p)
}

// Percent is the GC percent that puts the heap goal of a live heap of
// live bytes at floor or more: base, or more where base falls short. A
// live heap not measured yet (0) leaves base.
func Percent(base int, floor, live uint64) int {
	if live == 0 || live >= floor {
		return base
	}
	// The goal is live * (1 + percent/100): at least floor.
	need := (floor - live) * 100 / live
	if need >= maxPercent {
		return maxPercent
	}
	return max(base, int(need)+1)
}
