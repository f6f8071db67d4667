// Package manualclock is a clock that tests move by hand: the injected
// clock of the protocol scenarios (txn, observer, graph, lock, queue), so
// that each step is deterministic, whatever the machine's speed.
//
// Invariant: Now returns the start until Advance moves it, and never goes
// back. Safe for concurrent use.
package manualclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only by Advance.
type Clock struct {
	start time.Time
	mu    struct {
		sync.Mutex
		now time.Time
	}
}

// New returns a clock at start.
func New(start time.Time) *Clock {
	c := &Clock{start: start}
	c.mu.now = start
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

// Advance moves the clock forward by d; a negative d is ignored.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.mu.now = c.mu.now.Add(d)
	c.mu.Unlock()
}

// Since returns t as its distance from the clock's start, for a
// scenario's output ("+1.5s").
func (c *Clock) Since(t time.Time) string { return "+" + t.Sub(c.start).String() }
