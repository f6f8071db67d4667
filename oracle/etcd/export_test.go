package etcd

import (
	"context"
	"time"
)

// Test hooks of the oracle election, for the external tests.

// Crash stops the candidate as SIGKILL would: no resignation, no
// revocation.
func (c *Candidate) Crash() { c.crash() }

// SetBeforeRenew installs a hook run before each lease renewal; blocking
// in it models a paused process.
func SetBeforeRenew(o *CandidateOptions, hook func(ctx context.Context)) { o.beforeRenew = hook }

// SetClock installs the monotonic clock.
func SetClock(o *CandidateOptions, now func() time.Duration) { o.now = now }

// TermMarkWriter returns the mark write of the candidate's current term,
// nil if it leads none. It stays usable after the term ends: a stale
// leader's write.
func (c *Candidate) TermMarkWriter() func(uint64) error {
	if t := c.term(); t != nil {
		return t.mark.Write
	}
	return nil
}

// MarkKey is the key of the mark under prefix.
func MarkKey(prefix string) string { return markKey(prefix) }

// EncodeMark is a mark's stored value.
func EncodeMark(mark uint64) string { return encodeMark(mark) }
