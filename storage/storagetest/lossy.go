package storagetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// ErrInjected is what a Lossy store returns for a call it failed: the
// caller cannot tell whether the call was applied (a fault before the
// call, or a reply lost after it). It wraps storage.ErrUnavailable, as a
// network backend's error after its retries does.
var ErrInjected = fmt.Errorf("storagetest: injected fault: the call's outcome is unknown: %w", storage.ErrUnavailable)

// LossyOptions sets how often each fault strikes a Lossy store's calls
// (probabilities in [0, 1]).
type LossyOptions struct {
	// Seed seeds the faults: the same seed and the same calls in the same
	// order give the same faults.
	Seed uint64
	// FailBefore: a write fails without being applied.
	FailBefore float64
	// LoseReply: a write is applied and its reply is lost.
	LoseReply float64
	// Duplicate: a write sent without a nonce (CheckAndMutateIdempotent,
	// MutateRowsIdempotent, MutateRows, MutateRowsDeferred) is delivered
	// once more, later, after calls that followed it — a retry whose first
	// copy was delayed in the network. MutateRows carries a nonce over RPC
	// but is duplicated still, as Bigtable's client re-sends it without
	// one. CheckAndMutate and Increment (a nonce over RPC; never re-sent
	// by Bigtable's client) are never duplicated, and neither is Mutate
	// (a nonce over RPC; Bigtable's client re-sends it, which this wrapper
	// does not model).
	Duplicate float64
	// ReadFail: a read (ReadRow, Scan) fails.
	ReadFail float64
	// FlushOdds: each call first delivers one held duplicate with
	// probability 1/FlushOdds, so a duplicate stays late across several
	// calls. 0 means 8.
	FlushOdds int
}

// Lossy is a store as an unreliable network delivers it: writes fail
// before they are applied, or are applied and lose their reply, and calls
// without a nonce arrive again later, out of order; reads fail. It
// forwards every optional capability of the store it wraps (Clock,
// Deferred, Exclusive with ApplyHooker and Conditioned, Batcher, Counted,
// Idempotent, IdempotentBatcher, Compacter, Limited, SharedRows), so the
// fast paths the wrapped store offers are the ones under test. The store
// NewLossy returns offers the capabilities that can be emulated (Batcher,
// Counted, Idempotent, IdempotentBatcher, Compacter, Limited, SharedRows)
// always, and the others
// (Clock, Deferred, Exclusive with ApplyHooker and Conditioned) exactly
// when the wrapped store has them. Safe for concurrent use.
//
// Faults can be switched off (SetEnabled) to let a test check its result
// on a reliable store.
type Lossy struct {
	inner storage.Store
	opts  LossyOptions

	enabled atomic.Bool

	mu struct {
		sync.Mutex
		rng     *rand.Rand
		pending []func()
	}

	// Counts of the faults injected.
	failed, lost, duplicated, readsFailed atomic.Int64
}

// LossyStats counts the faults a Lossy store injected.
type LossyStats struct {
	FailedBefore, RepliesLost, Duplicated, ReadsFailed int64
}

// NewLossy wraps s. The returned store has s's optional capabilities and
// no others; l controls and counts its faults.
func NewLossy(s storage.Store, opts LossyOptions) (store storage.Store, l *Lossy) {
	if opts.FlushOdds <= 0 {
		opts.FlushOdds = 8
	}
	l = &Lossy{inner: s, opts: opts}
	l.mu.rng = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	l.enabled.Store(true)
	return l.withCapabilities(), l
}

// SetEnabled turns the faults on or off. Duplicates already held are
// still delivered (Flush delivers them all).
func (l *Lossy) SetEnabled(on bool) { l.enabled.Store(on) }

// Stats returns the faults injected so far.
func (l *Lossy) Stats() LossyStats {
	return LossyStats{l.failed.Load(), l.lost.Load(), l.duplicated.Load(), l.readsFailed.Load()}
}

// Flush delivers every held duplicate now.
func (l *Lossy) Flush() {
	l.mu.Lock()
	pending := l.mu.pending
	l.mu.pending = nil
	l.mu.Unlock()
	for _, f := range pending {
		f()
	}
}

// Inner returns the wrapped store.
func (l *Lossy) Inner() storage.Store { return l.inner }

func (l *Lossy) roll(p float64) bool {
	if p <= 0 || !l.enabled.Load() {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.rng.Float64() < p
}

// deliverLate, at random, delivers one held duplicate before a call.
func (l *Lossy) deliverLate() {
	l.mu.Lock()
	var f func()
	if n := len(l.mu.pending); n > 0 && l.mu.rng.IntN(l.opts.FlushOdds) == 0 {
		i := l.mu.rng.IntN(n)
		f = l.mu.pending[i]
		l.mu.pending = append(l.mu.pending[:i], l.mu.pending[i+1:]...)
	}
	l.mu.Unlock()
	if f != nil {
		f()
	}
}

// hold keeps a copy of a nonce-less call, to deliver it later.
func (l *Lossy) hold(again func()) {
	if !l.roll(l.opts.Duplicate) {
		return
	}
	l.duplicated.Add(1)
	l.mu.Lock()
	l.mu.pending = append(l.mu.pending, again)
	l.mu.Unlock()
}

// write runs one write call under the faults. again, if not nil, sends
// the call once more, for a call that carries no nonce (its copy may
// arrive again later); it must not touch the caller's results, which the
// caller may be reading by then.
func (l *Lossy) write(ctx context.Context, call func(ctx context.Context) error, again func(ctx context.Context)) error {
	l.deliverLate()
	if l.roll(l.opts.FailBefore) {
		l.failed.Add(1)
		return ErrInjected
	}
	err := call(ctx)
	if again != nil {
		// The copy is delivered whatever the caller does next, so it must
		// not end with the caller's context.
		late := context.WithoutCancel(ctx)
		l.hold(func() { again(late) })
	}
	if err == nil && l.roll(l.opts.LoseReply) {
		l.lost.Add(1)
		return ErrInjected
	}
	return err
}

func (l *Lossy) read() error {
	l.deliverLate()
	if l.roll(l.opts.ReadFail) {
		l.readsFailed.Add(1)
		return ErrInjected
	}
	return nil
}

// ReadRow implements storage.Store.
func (l *Lossy) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := l.read(); err != nil {
		return storage.Row{}, err
	}
	return l.inner.ReadRow(ctx, row, filter)
}

// Scan implements storage.Store.
func (l *Lossy) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	if err := l.read(); err != nil {
		return err
	}
	return l.inner.Scan(ctx, start, end, filter, limit, fn)
}

// Mutate implements storage.Store.
func (l *Lossy) Mutate(ctx context.Context, row []byte, mutations ...storage.Mutation) error {
	return l.write(ctx, func(ctx context.Context) error { return l.inner.Mutate(ctx, row, mutations...) }, nil)
}

// CheckAndMutate implements storage.Store.
func (l *Lossy) CheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	var matched bool
	err := l.write(ctx, func(ctx context.Context) (err error) {
		matched, err = l.inner.CheckAndMutate(ctx, row, predicate, ifTrue, ifFalse)
		return err
	}, nil)
	return matched, err
}

// CheckAndMutateUnless implements storage.Unlessed, as the wrapped store
// does (every backend is Unlessed; one that is not fails the call).
func (l *Lossy) CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	u, ok := l.inner.(storage.Unlessed)
	if !ok {
		return false, fmt.Errorf("%w: the wrapped store is not Unlessed", storage.ErrInvalidArgument)
	}
	var matched bool
	err := l.write(ctx, func(ctx context.Context) (err error) {
		matched, err = u.CheckAndMutateUnless(ctx, row, predicate, unless, ifTrue, ifFalse)
		return err
	}, nil)
	return matched, err
}

// Increment implements storage.Store.
func (l *Lossy) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	var sum int64
	err := l.write(ctx, func(ctx context.Context) (err error) {
		sum, err = l.inner.Increment(ctx, row, family, qualifier, delta)
		return err
	}, nil)
	return sum, err
}

// Close implements storage.Store: it closes the wrapped store, after
// delivering the held duplicates.
func (l *Lossy) Close() error {
	l.Flush()
	return l.inner.Close()
}

// CheckAndMutateIdempotent implements storage.Idempotent: sent without a
// nonce, it may arrive again later.
func (l *Lossy) CheckAndMutateIdempotent(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	send := func(ctx context.Context) (bool, error) {
		if i, ok := l.inner.(storage.Idempotent); ok {
			return i.CheckAndMutateIdempotent(ctx, row, predicate, ifTrue, ifFalse)
		}
		return l.inner.CheckAndMutate(ctx, row, predicate, ifTrue, ifFalse)
	}
	var matched bool
	err := l.write(ctx, func(ctx context.Context) (err error) {
		matched, err = send(ctx)
		return err
	}, func(ctx context.Context) { _, _ = send(ctx) })
	return matched, err
}

// MutateRows implements storage.Batcher (row by row if the wrapped store
// cannot batch): sent without a nonce, it may arrive again later.
func (l *Lossy) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	send := func(ctx context.Context) ([]error, error) { return SharedStore{Store: l.inner}.MutateRows(ctx, rows) }
	var errs []error
	err := l.write(ctx, func(ctx context.Context) (err error) {
		errs, err = send(ctx)
		return err
	}, func(ctx context.Context) { _, _ = send(ctx) })
	return errs, err
}

// MutateRowsIdempotent implements storage.IdempotentBatcher (as
// MutateRows if the wrapped store has no such variant): sent without a
// nonce, it may arrive again later.
func (l *Lossy) MutateRowsIdempotent(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	send := func(ctx context.Context) ([]error, error) {
		if b, ok := l.inner.(storage.IdempotentBatcher); ok {
			return b.MutateRowsIdempotent(ctx, rows)
		}
		return SharedStore{Store: l.inner}.MutateRows(ctx, rows)
	}
	var errs []error
	err := l.write(ctx, func(ctx context.Context) (err error) {
		errs, err = send(ctx)
		return err
	}, func(ctx context.Context) { _, _ = send(ctx) })
	return errs, err
}

// ScanCounted implements storage.Counted (counting rows delivered if the
// wrapped store cannot count).
func (l *Lossy) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	if err := l.read(); err != nil {
		return 0, err
	}
	return SharedStore{Store: l.inner}.ScanCounted(ctx, start, end, filter, limit, fn)
}

// CompactFamily implements storage.Compacter (nothing to do if the
// wrapped store keeps no deletion markers).
func (l *Lossy) CompactFamily(ctx context.Context, family string) error {
	if c, ok := l.inner.(storage.Compacter); ok {
		return c.CompactFamily(ctx, family)
	}
	return storage.ValidateFamily(family)
}

// MaxTimestamp implements storage.Limited as the wrapped store does.
func (l *Lossy) MaxTimestamp() uint64 { return storage.MaxTimestampOf(l.inner) }

// SharedRows implements storage.SharedRows as the wrapped store does.
func (l *Lossy) SharedRows() bool { return SharedStore{Store: l.inner}.SharedRows() }

// The capabilities that cannot be emulated are forwarded only when the
// wrapped store has them, by the variant withCapabilities picks.

type lossyClock struct{ l *Lossy }

// Now implements storage.Clock. A clock reading is a read.
func (c lossyClock) Now(ctx context.Context) (time.Time, error) {
	if err := c.l.read(); err != nil {
		return time.Time{}, err
	}
	return c.l.inner.(storage.Clock).Now(ctx)
}

type lossyDeferred struct{ l *Lossy }

// CheckAndMutateDeferred implements storage.Deferred: in process, so no
// duplicate; it may still fail or lose its reply.
func (d lossyDeferred) CheckAndMutateDeferred(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	var matched bool
	err := d.l.write(ctx, func(ctx context.Context) (err error) {
		matched, err = d.l.inner.(storage.Deferred).CheckAndMutateDeferred(ctx, row, predicate, ifTrue, ifFalse)
		return err
	}, nil)
	return matched, err
}

// MutateRowsDeferred implements storage.Deferred.
func (d lossyDeferred) MutateRowsDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	var errs []error
	err := d.l.write(ctx, func(ctx context.Context) (err error) {
		errs, err = d.l.inner.(storage.Deferred).MutateRowsDeferred(ctx, rows)
		return err
	}, nil)
	return errs, err
}

type lossyOwned struct{ l *Lossy }

// Exclusive implements storage.Exclusive as the wrapped store does.
func (o lossyOwned) Exclusive() bool { return o.l.inner.(storage.Exclusive).Exclusive() }

// SetApplyHook implements storage.ApplyHooker: the wrapped store calls
// the hook for every write it applies, replies lost or not.
func (o lossyOwned) SetApplyHook(hook storage.ApplyHook) (func(), error) {
	return o.l.inner.(storage.ApplyHooker).SetApplyHook(hook)
}

// CheckAndMutateCond implements storage.Conditioned.
func (o lossyOwned) CheckAndMutateCond(ctx context.Context, row []byte, cond storage.Cond, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	var matched bool
	err := o.l.write(ctx, func(ctx context.Context) (err error) {
		matched, err = o.l.inner.(storage.Conditioned).CheckAndMutateCond(ctx, row, cond, predicate, ifTrue, ifFalse, deferred)
		return err
	}, nil)
	return matched, err
}

// CheckAndMutateCondUnless implements storage.CondUnlessed, as the
// wrapped store does (the embedded backends all are).
func (o lossyOwned) CheckAndMutateCondUnless(ctx context.Context, row []byte, cond storage.Cond, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	cu, ok := o.l.inner.(storage.CondUnlessed)
	if !ok {
		return false, fmt.Errorf("%w: the wrapped store is not CondUnlessed", storage.ErrInvalidArgument)
	}
	var matched bool
	err := o.l.write(ctx, func(ctx context.Context) (err error) {
		matched, err = cu.CheckAndMutateCondUnless(ctx, row, cond, predicate, unless, ifTrue, ifFalse, deferred)
		return err
	}, nil)
	return matched, err
}

// withCapabilities returns l as a store with exactly the inner store's
// capabilities among those that cannot be emulated.
func (l *Lossy) withCapabilities() storage.Store {
	_, clock := l.inner.(storage.Clock)
	_, deferred := l.inner.(storage.Deferred)
	_, excl := l.inner.(storage.Exclusive)
	_, hooker := l.inner.(storage.ApplyHooker)
	_, cond := l.inner.(storage.Conditioned)
	owned := excl && hooker && cond
	c, d, o := lossyClock{l}, lossyDeferred{l}, lossyOwned{l}
	switch {
	case clock && deferred && owned:
		return &struct {
			*Lossy
			lossyClock
			lossyDeferred
			lossyOwned
		}{l, c, d, o}
	case clock && deferred:
		return &struct {
			*Lossy
			lossyClock
			lossyDeferred
		}{l, c, d}
	case clock && owned:
		return &struct {
			*Lossy
			lossyClock
			lossyOwned
		}{l, c, o}
	case deferred && owned:
		return &struct {
			*Lossy
			lossyDeferred
			lossyOwned
		}{l, d, o}
	case clock:
		return &struct {
			*Lossy
			lossyClock
		}{l, c}
	case deferred:
		return &struct {
			*Lossy
			lossyDeferred
		}{l, d}
	case owned:
		return &struct {
			*Lossy
			lossyOwned
		}{l, o}
	}
	return l
}
