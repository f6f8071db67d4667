package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestBenchQueue: the queue figure, with few items in flight, prints a
// row for both sides at both counts and its three summary lines (a smoke
// test: the figures themselves are not judged here).
func TestBenchQueue(t *testing.T) {
	var out strings.Builder
	cfg := benchConfig{dir: t.TempDir(), duration: 300 * time.Millisecond, valueSize: 100, log: io.Discard, targets: &targetTally{}}
	if err := benchQueueInFlight(context.Background(), cfg, &out, 100, 2000); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"queue 100 ", "scan 100 ", "queue 2000 ", "scan 2000 ",
		"keys visited per Pop, 2000 vs 100 in flight", "pop+ack items/s, 2000 vs 100", "pop+ack at 2000 in flight"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(stepNames(benchSteps), "queue") {
		t.Errorf("no queue step among %s", stepNames(benchSteps))
	}
}
