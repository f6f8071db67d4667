// Package ctxwait is the one wait that honours a context, for the
// packages' back-offs and polls.
//
// Invariant: Sleep returns nil only after d has passed, and ctx's error as
// soon as ctx ends before that; it holds no timer once it returns.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends (then it returns ctx's error). A d of
// zero or less returns at once: nil, or ctx's error if it has ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
