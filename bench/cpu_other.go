//go:build !unix

package bench

import "time"

// processCPU is 0 where this platform's CPU time is not read: the figures
// print it as not measured.
func processCPU() time.Duration { return 0 }
