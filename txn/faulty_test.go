package txn

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

var errInjectedTimeout = errors.New("faulty: injected timeout")

// faultyStore delivers writes badly: it applies a call and then reports a
// timeout, applies it twice, or holds it back (reporting a timeout) and
// delivers it later, after later calls. Reads may time out. The protocol
// must stay correct regardless (invariant 6).
type faultyStore struct {
	storage.Store
	mu      sync.Mutex
	rng     *rand.Rand
	pending []func()
	faults  map[string]int
	// flushOdds: each call first delivers one held-back call with
	// probability 1/flushOdds, so late calls stay late across several
	// calls (long enough for a newer commit of the same cell).
	flushOdds int
}

func newFaultyStore(s storage.Store, seed uint64) *faultyStore {
	return &faultyStore{Store: s, rng: rand.New(rand.NewPCG(seed, seed)), faults: map[string]int{}, flushOdds: 12}
}

type fault int

const (
	deliver fault = iota
	applyThenTimeout
	applyTwice
	late
)

// pick chooses a fault and, at random, first delivers one held-back call.
func (f *faultyStore) pick() (fault, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var flush func()
	if len(f.pending) > 0 && f.rng.IntN(f.flushOdds) == 0 {
		i := f.rng.IntN(len(f.pending))
		flush = f.pending[i]
		f.pending = append(f.pending[:i], f.pending[i+1:]...)
	}
	r := f.rng.IntN(100)
	switch {
	case r < 5:
		f.faults["apply-then-timeout"]++
		return applyThenTimeout, flush
	case r < 10:
		f.faults["apply-twice"]++
		return applyTwice, flush
	case r < 14:
		f.faults["late"]++
		return late, flush
	}
	return deliver, flush
}

func (f *faultyStore) hold(call func()) {
	f.mu.Lock()
	f.pending = append(f.pending, call)
	f.mu.Unlock()
}

// drain delivers every held-back call.
func (f *faultyStore) drain() {
	f.mu.Lock()
	p := f.pending
	f.pending = nil
	f.mu.Unlock()
	for _, call := range p {
		call()
	}
}

func (f *faultyStore) do(call func() error) error {
	kind, flush := f.pick()
	if flush != nil {
		flush()
	}
	switch kind {
	case applyThenTimeout:
		_ = call()
		return errInjectedTimeout
	case applyTwice:
		_ = call()
		return call()
	case late:
		f.hold(func() { _ = call() })
		return errInjectedTimeout
	}
	return call()
}

func (f *faultyStore) CheckAndMutate(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	// A late delivery runs after this call has returned, on another
	// goroutine: its result must not reach this caller.
	var matched atomic.Bool
	err := f.do(func() error {
		m, err := f.Store.CheckAndMutate(context.WithoutCancel(ctx), row, pred, ifTrue, ifFalse)
		matched.Store(m)
		return err
	})
	return matched.Load(), err
}

func (f *faultyStore) Mutate(ctx context.Context, row []byte, muts ...storage.Mutation) error {
	return f.do(func() error { return f.Store.Mutate(context.WithoutCancel(ctx), row, muts...) })
}

// MutateRows delivers a batch as badly as the other writes: a late or
// repeated batch of secondary commits is what makes invariant 6 hard.
func (f *faultyStore) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return f.batch(func() ([]error, error) {
		return f.Store.(storage.Batcher).MutateRows(context.WithoutCancel(ctx), rows)
	})
}

func (f *faultyStore) batch(send func() ([]error, error)) ([]error, error) {
	var errs atomic.Pointer[[]error]
	err := f.do(func() error {
		e, err := send()
		errs.Store(&e)
		return err
	})
	if p := errs.Load(); p != nil && err == nil {
		return *p, nil
	}
	return nil, err
}

func (f *faultyStore) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	f.mu.Lock()
	fail := f.rng.IntN(100) < 3
	f.mu.Unlock()
	if fail {
		return storage.Row{}, errInjectedTimeout
	}
	return f.Store.ReadRow(ctx, row, filter)
}

// faultyExclusive is a faultyStore over an exclusive store (memory) that
// forwards every capability the store has — its index hook, Conditioned,
// Deferred — delivering each call as badly as the others (STYLE.md: a test
// double that hides a capability leaves its fast path untested). Hooks come
// from the inner store, which applies under its latch.
type faultyExclusive struct {
	*faultyStore
	mem *memory.Store
}

func newFaultyExclusive(mem *memory.Store, seed uint64) faultyExclusive {
	return faultyExclusive{newFaultyStore(mem, seed), mem}
}

var (
	_ storage.Batcher     = faultyExclusive{}
	_ storage.Deferred    = faultyExclusive{}
	_ storage.Conditioned = faultyExclusive{}
	_ storage.ApplyHooker = faultyExclusive{}
	_ storage.Exclusive   = faultyExclusive{}
)

func (f faultyExclusive) Exclusive() bool { return true }

func (f faultyExclusive) SetApplyHook(h storage.ApplyHook) (func(), error) {
	return f.mem.SetApplyHook(h)
}

// CheckAndMutateCond: a late or repeated call asks cond again, under the
// latch, when it is applied.
func (f faultyExclusive) CheckAndMutateCond(ctx context.Context, row []byte, cond storage.Cond, pred storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	var matched atomic.Bool
	err := f.do(func() error {
		m, err := f.mem.CheckAndMutateCond(context.WithoutCancel(ctx), row, cond, pred, ifTrue, ifFalse, deferred)
		matched.Store(m)
		return err
	})
	return matched.Load(), err
}

func (f faultyExclusive) CheckAndMutateDeferred(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	var matched atomic.Bool
	err := f.do(func() error {
		m, err := f.mem.CheckAndMutateDeferred(context.WithoutCancel(ctx), row, pred, ifTrue, ifFalse)
		matched.Store(m)
		return err
	})
	return matched.Load(), err
}

func (f faultyExclusive) MutateRowsDeferred(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	return f.batch(func() ([]error, error) { return f.mem.MutateRowsDeferred(context.WithoutCancel(ctx), rows) })
}
