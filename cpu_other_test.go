//go:build !unix

package percolator_test

import "time"

// processCPU is 0 where this platform's CPU time is not read: the
// benchmarks then report no CPU per op.
func processCPU() time.Duration { return 0 }
