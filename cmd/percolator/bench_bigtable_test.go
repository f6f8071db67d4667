package main

import (
	"strings"
	"testing"
)

// TestBenchBigtableRPCs: on the emulator, with the bench's oracle serving
// the observer registry version as `percolator oracle --bigtable` does, a
// 1-row write transaction is exactly 2 CheckAndMutateRow (no ReadRows of
// the registry version row), and the figure says its target is met.
func TestBenchBigtableRPCs(t *testing.T) {
	out, errOut, code := runCLI(t, "bench", "--bigtable-emulator", "--only", "rpcs")
	for _, want := range []string{
		"bigtable rpcs: 1-row write txn = 2.00 CheckAndMutateRow\n",
		"bigtable rpcs: 8-row write txn = 9.00 CheckAndMutateRow + 1.00 MutateRows\n",
		"bigtable rpcs: read (a read-only txn's Get) = 1.0", // and the safe point's re-read, once a second
		"no other call: met\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("bench --bigtable-emulator: exit %d, no %q in\n%s%s", code, want, out, errOut)
		}
	}
}
