package heapfloor

import (
	"runtime"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base        int
		floor, live uint64
		want        int
	}{
		{100, 64 * mib, 0, 100},             // not measured yet
		{100, 64 * mib, 64 * mib, 100},      // at the floor
		{100, 64 * mib, 200 * mib, 100},     // above it: GOGC alone
		{100, 64 * mib, 2 * mib, 3101},      // goal 2 MiB * 32.01 >= 64 MiB
		{100, 64 * mib, 40 * mib, 100},      // base already reaches it
		{50, 64 * mib, 40 * mib, 61},        // base short of it
		{100, 64 * mib, 1, maxPercent},      // a few bytes live
		{5000, 64 * mib, 2 * mib, 5000},     // a higher GOGC stands
		{100, 64 * mib, 32*mib + 1, 100},    // just past half
		{100, 64 * mib, 32*mib - 1, 101},    // just short of half
		{100, 1 << 62, 1 << 20, maxPercent}, // no overflow
	} {
		got := Percent(c.base, c.floor, c.live)
		if got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.base, c.floor, c.live, got, c.want)
		}
		if goal := c.live + c.live*uint64(got)/100; c.live > 0 && got < maxPercent && goal < c.floor {
			t.Errorf("Percent(%d, %d, %d) = %d: goal %d below the floor", c.base, c.floor, c.live, got, goal)
		}
	}
}

// TestStartStop: a floor far above the live heap raises the GC percent,
// a second Floor meanwhile changes nothing, and Stop puts back the
// percent the process had.
func TestStartStop(t *testing.T) {
	base := CurrentPercent()
	if base < 0 {
		t.Skip("GOGC=off")
	}
	f := Start(1<<40, time.Millisecond)
	Start(1<<40, time.Millisecond).Stop() // does nothing while f runs
	deadline := time.Now().Add(10 * time.Second)
	for CurrentPercent() <= base {
		if time.Now().After(deadline) {
			t.Fatalf("the GC percent stayed %d under a floor of 1 TiB", CurrentPercent())
		}
		runtime.GC() // a live heap to read
		time.Sleep(time.Millisecond)
	}
	f.Stop()
	f.Stop()
	if p := CurrentPercent(); p != base {
		t.Errorf("after Stop the GC percent is %d, want %d", p, base)
	}
}
