package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/observer"
)

// TestStatusPartitions: status prints the partition table (owner, range,
// backlog) when workers publish one, and nothing of it otherwise.
func TestStatusPartitions(t *testing.T) {
	st := percolator.ObserverStatus{Scanners: map[string]int64{"full_passes": 4, "range_passes": 30}}
	var plain bytes.Buffer
	printObservers(&plain, st)
	if strings.Contains(plain.String(), "PARTITION") {
		t.Fatalf("a partition table without partitions:\n%s", plain.String())
	}
	now := time.Now()
	st.Partitions = []observer.PartitionStatus{
		{Owner: "w0", Worker: "host/1/run-a", Index: 0, Of: 2, End: []byte("k100"), Version: 3, Updated: now, Backlog: 7},
		{Owner: "w1", Worker: "host/2/run-b", Index: 1, Of: 2, Start: []byte("k\x00150"), Version: 5, Updated: now, Backlog: 2},
	}
	st.Unowned = 1
	var out bytes.Buffer
	printObservers(&out, st)
	got := out.String()
	if !strings.HasPrefix(got, plain.String()) {
		t.Fatalf("the partition table changed the output before it:\n%s", got)
	}
	table := strings.Split(strings.TrimPrefix(got, plain.String()), "\n")
	want := [][]string{
		{"PARTITION", "OWNER", "WORKER", "START", "END", "BACKLOG", "VERSION", "AGE"},
		{"0/2", "w0", "host/1/run-a", "-", "k100", "7", "3"},
		{"1/2", "w1", "host/2/run-b", `"k\x00150"`, "-", "2", "5"},
	}
	for i, w := range want {
		fields := strings.Fields(table[2+i])
		if len(fields) < len(w) || !equalPrefix(fields, w) {
			t.Fatalf("line %d of the partition table: %q, want %q\n%s", i, fields, w, got)
		}
	}
	if !strings.Contains(got, "notified rows in no worker's range: 1 (found by the passes over the whole keyspace: 4 so far, 30 over a range)") {
		t.Fatalf("no unowned count:\n%s", got)
	}
}

func equalPrefix(got, want []string) bool {
	for i := range want {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
