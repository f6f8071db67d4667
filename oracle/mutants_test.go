//go:build percolator_mutants

package oracle

import (
	"context"
	"testing"

	"github.com/seed-992972ee/percolator/internal/mutant"
)

// repeats returns how many of n calls to one Client got the timestamp the
// call before got, or lower.
func repeats(t *testing.T, n int) int {
	a, err := OpenAllocator("", AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c := NewClient(a)
	var prev uint64
	got := 0
	for range n {
		ts, err := c.Timestamp(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ts <= prev {
			got++
		}
		prev = ts
	}
	return got
}

// TestRepeatTimestampMutant: with the mutant, two calls get the same
// timestamp (invariant 1 broken); without it, none do.
func TestRepeatTimestampMutant(t *testing.T) {
	restore := mutant.Set()
	if n := repeats(t, 4*repeatEvery); n != 0 {
		t.Fatalf("without the mutant, %d calls got a timestamp again", n)
	}
	restore()
	defer mutant.Set(mutant.RepeatTimestamp)()
	if n := repeats(t, 4*repeatEvery); n == 0 {
		t.Fatal("repeat-timestamp: no call got a timestamp again")
	} else {
		t.Logf("repeat-timestamp: %d of %d calls got the timestamp before again", n, 4*repeatEvery)
	}
}

// stale has two Clients of one oracle take turns: a, then b, then a
// again. It returns b's timestamp and a's second, which b's call
// returned before a's second asked.
func stale(t *testing.T) (b1, a2 uint64) {
	alloc, err := OpenAllocator("", AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close()
	ctx := context.Background()
	a, b := NewClient(alloc), NewClient(alloc)
	ts := func(c *Client) uint64 {
		v, err := c.Timestamp(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ts(a)
	b1 = ts(b)
	return b1, ts(a)
}

// TestStaleRangeMutant: with the mutant, a Client hands out a timestamp
// lower than one another Client's caller received before it asked (the
// batching rule of invariant 1 broken); without it, never.
func TestStaleRangeMutant(t *testing.T) {
	restore := mutant.Set()
	if b1, a2 := stale(t); a2 <= b1 {
		t.Fatalf("without the mutant: %d handed out after %d", a2, b1)
	}
	restore()
	defer mutant.Set(mutant.StaleRange)()
	b1, a2 := stale(t)
	if a2 > b1 {
		t.Fatalf("stale-range: %d handed out after %d, in order", a2, b1)
	}
	t.Logf("stale-range: %d handed out after %d had been received", a2, b1)
}
