package oracle

import "errors"

// Sentinel errors. Every error this package returns wraps one of these or is
// a context error from the caller's own context.
var (
	// ErrExhausted means the next timestamp would exceed MaxTimestamp.
	ErrExhausted = errors.New("oracle: timestamp space exhausted")
	// ErrClosed means the Allocator was closed.
	ErrClosed = errors.New("oracle: allocator closed")
	// ErrLocked means another Allocator, in this or another process, holds
	// the mark file.
	ErrLocked = errors.New("oracle: mark file is locked by another allocator")
	// ErrCorruptMark means the mark file exists but does not hold a valid
	// mark. The allocator refuses to start rather than reset the timestamp
	// sequence.
	ErrCorruptMark = errors.New("oracle: corrupt mark file")
	// ErrInvalidArgument means a count, duration or option is out of range.
	ErrInvalidArgument = errors.New("oracle: invalid argument")
	// ErrBadReply means a Backend returned a range that is not above every
	// timestamp it returned before (or is out of range). The Client fails
	// the batch rather than hand out a reused timestamp.
	ErrBadReply = errors.New("oracle: backend returned a stale or invalid timestamp")
	// ErrLeaseLost means a store allocator could not renew its lease on
	// the store's mark in time, or found it taken by another allocator: it
	// hands out nothing more (another may be handing out timestamps now).
	ErrLeaseLost = errors.New("oracle: lease on the store's timestamp mark lost")
	// ErrNotLeader means this oracle is not the elected one, or can no
	// longer prove it still is (its election lease not renewed in time):
	// it hands out nothing, and a client asks the elected oracle instead.
	ErrNotLeader = errors.New("oracle: not the leader")
)
