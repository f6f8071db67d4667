package manualclock

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	c := New(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now %v, want the start %v", c.Now(), start)
	}
	c.Advance(1500 * time.Millisecond)
	c.Advance(-time.Hour)
	if got := c.Since(c.Now()); got != "+1.5s" {
		t.Fatalf("after 1.5s and a negative advance: %s", got)
	}
}
