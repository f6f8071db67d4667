//go:build !unix

package proccpu

import "time"

// Used is 0 where this platform's CPU time is not read.
func Used() time.Duration { return 0 }
