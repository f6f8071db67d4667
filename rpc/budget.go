package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// An operation is what the retry budget covers: the calls that together
// do one thing for the caller (a transaction's commit with its abort and
// cleanup, a read with its lock waits). See WithOperation and doc.go,
// "Budgets".
//
// Concurrency: safe for concurrent use (an operation's calls may run in
// parallel); mu guards the fields in it.
type operation struct {
	parent *operation
	// ctx is the context the operation began with. Once it ends, the
	// operation's calls made with a context that outlives it (through
	// context.WithoutCancel: cleanup) have the cleanup budget left.
	ctx context.Context
	// budgeted: the calls share a retry budget counted from lastAnswer
	// (WithOperation); otherwise only the cleanup budget (WithCleanup).
	budgeted bool
	mu       struct {
		sync.Mutex
		// lastAnswer is the operation's start, or the last answer the
		// server gave one of its calls.
		lastAnswer time.Time
		// endedAt is when ctx was first seen ended; zero before.
		endedAt time.Time
		// lastErr is the operation's last retryable failure.
		lastErr error
	}
}

type operationKey struct{}

// WithOperation returns a context that makes the calls made with it, on
// any Conn, one operation (with every context derived from it, including
// through context.WithoutCancel, which keeps values):
//
//  1. The operation has one retry budget (DialOptions.RetryBudget),
//     counted from its start or from the last answer the server gave any
//     of its calls, whichever is later: once the server has not answered
//     the operation for the budget, its calls in flight give up and its
//     later calls fail at once, with ErrUnavailable naming the server. A
//     caller that re-sends a failed call therefore does not get a new
//     budget with each. Each call keeps its own budget as well (from its
//     start, or a stream's last message).
//  2. When ctx ends, the operation's calls made with a context that
//     outlives it (cleanup run with context.WithoutCancel) have the
//     cleanup budget (DialOptions.CleanupBudget) left, their attempts in
//     flight included: a cancelled operation ends within it whatever the
//     server does.
//
// An operation is meant to be busy: a time without calls counts against
// its budget. For a long-lived context that only needs point 2 (a
// command's, a worker's), use WithCleanup. Operations nest: a call is
// bounded by every operation it is part of, and an answer counts for all
// of them.
func WithOperation(ctx context.Context) context.Context { return with(ctx, true) }

// WithCleanup returns a context whose calls made after it ended, with a
// context that outlives it (context.WithoutCancel), have the cleanup
// budget left, as WithOperation's point 2; it shares no retry budget
// between its calls. A command's context, say, so that whatever cleanup
// runs after a signal ends within the cleanup budget.
func WithCleanup(ctx context.Context) context.Context { return with(ctx, false) }

func with(ctx context.Context, budgeted bool) context.Context {
	parent, _ := ctx.Value(operationKey{}).(*operation)
	o := &operation{parent: parent, ctx: ctx, budgeted: budgeted}
	o.mu.lastAnswer = time.Now()
	return context.WithValue(ctx, operationKey{}, o)
}

// answered records an answer from the server at now, for the operation
// and its parents.
func (o *operation) answered(now time.Time) {
	for ; o != nil; o = o.parent {
		o.mu.Lock()
		o.mu.lastAnswer = now
		o.mu.Unlock()
	}
}

// failed records a retryable failure.
func (o *operation) failed(err error) {
	for ; o != nil; o = o.parent {
		o.mu.Lock()
		o.mu.lastErr = err
		o.mu.Unlock()
	}
}

// markEnded records that ctx has ended, at now unless it was seen before.
func (o *operation) markEnded(now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.endedAt.IsZero() {
		o.mu.endedAt = now
	}
	return o.mu.endedAt
}

// limitKind says which budget ends a call.
type limitKind uint8

const (
	limitCall      limitKind = iota // the call's own retry budget
	limitOperation                  // an operation's retry budget
	limitCleanup                    // an ended operation's cleanup budget
)

// budget is one call's view of its budgets: its own clock and the
// operations it is part of.
type budget struct {
	c  *Conn
	op *operation // innermost; nil outside any operation
	// since is the start of the call's own budget: its start, or the last
	// message of a stream. Guarded by mu: a stream's progress moves it.
	mu    sync.Mutex
	since time.Time
	// fails counts the call's failures since its last progress: the
	// back-off's exponent. Guarded by mu.
	fails int
	// lastErr is the call's own last retryable failure, converted.
	lastErr error
}

// deadline returns when the call must give up, and which budget says so.
func (b *budget) deadline(now time.Time) (time.Time, limitKind, *operation) {
	b.mu.Lock()
	d, kind := b.since.Add(b.c.opts.RetryBudget), limitCall
	b.mu.Unlock()
	var which *operation
	for o := b.op; o != nil; o = o.parent {
		if o.ctx.Err() != nil {
			if e := o.markEnded(now).Add(b.c.opts.CleanupBudget); e.Before(d) {
				d, kind, which = e, limitCleanup, o
			}
		}
		if !o.budgeted {
			continue
		}
		o.mu.Lock()
		e := o.mu.lastAnswer.Add(b.c.opts.RetryBudget)
		o.mu.Unlock()
		if e.Before(d) {
			d, kind, which = e, limitOperation, o
		}
	}
	return d, kind, which
}

// progress records an answer (a stream's message): the call's own budget
// starts again, and its operations are no longer failing.
func (b *budget) progress(now time.Time) {
	b.mu.Lock()
	b.since, b.fails = now, 0
	b.mu.Unlock()
	b.op.answered(now)
}

// failures returns the call's failures since its last progress, less one.
func (b *budget) failures() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.fails-1, 0)
}

// failed records a retryable failure of the call, converted.
func (b *budget) failed(err error) {
	b.mu.Lock()
	b.fails++
	b.mu.Unlock()
	b.lastErr = err
	b.op.failed(err)
}

// spent is the error of a call that gave up on kind's budget.
func (b *budget) spent(kind limitKind, o *operation) error {
	last := b.lastErr
	if last == nil && o != nil { // no attempt of this call failed: the operation's
		o.mu.Lock()
		last = o.mu.lastErr
		o.mu.Unlock()
	}
	if last == nil {
		last = fmt.Errorf("%w: server %s", ErrUnavailable, b.c.Addr)
	}
	switch kind {
	case limitOperation:
		return &spentError{last: last, why: fmt.Sprintf("the operation's retry budget (%v) is spent: the server has not answered it for that long", b.c.opts.RetryBudget)}
	case limitCleanup:
		cause := context.Cause(o.ctx)
		return &spentError{last: last, cause: cause,
			why: fmt.Sprintf("cleanup after the operation ended (%v) cut short after the cleanup budget (%v)", cause, b.c.opts.CleanupBudget)}
	}
	return &spentError{last: last, why: fmt.Sprintf("no answer within the retry budget (%v)", b.c.opts.RetryBudget)}
}

// spentError is a call given up on a budget: it matches ErrUnavailable
// (and what its last failure matched, the server's address in its
// message), and for a cleanup cut short the cause of the operation's end
// as well (context.Canceled, say), so that no one retries it.
type spentError struct {
	last  error // the last failure, converted (Conn.Error)
	cause error // a cleanup's: why the operation ended; nil otherwise
	why   string
}

func (e *spentError) Error() string { return e.last.Error() + " (" + e.why + ")" }

func (e *spentError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.last, e.cause}
	}
	return []error{e.last}
}

func (e *spentError) Is(target error) bool { return target == ErrUnavailable }

// cut says why an attempt was cancelled by the budget rather than by its
// caller.
type cut struct{ v atomic.Uint32 }

const (
	cutNone    = iota
	cutIdle    // a stream sent nothing for the attempt's limit
	cutCleanup // an operation ended and its cleanup budget ran out
)

func (c *cut) set(why uint32) { c.v.CompareAndSwap(cutNone, why) }

// errCleanupCut marks an attempt ended by an operation's cleanup budget.
var errCleanupCut = errors.New("rpc: attempt cut short by the cleanup budget")
