package oracle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// The store allocator: the mark the embedded DB and `percolator serve`
// hand out timestamps under, kept with a lease in a reserved row of the
// store they serve (the cell's layout: lease.go).

// StoreOptions configures OpenStoreAllocator. Owner is required.
type StoreOptions struct {
	AllocatorOptions
	// Owner names this allocator's process in the lease (a coord owner ID).
	Owner string
	// Exclusive says the caller owns the store: no other client can use it
	// (an embedded store whose one client is the caller, holding its apply
	// hook and directory lock). A lease held by another owner then belongs
	// to an allocator that was closed or whose process exited, and is
	// taken over at once instead of when it expires. Never set it on a
	// store another process may use: a holder that is only slow (paused,
	// partitioned, its liveness session expired) still hands out
	// timestamps until its lease runs out by its own clock, so only expiry
	// may hand the lease on.
	Exclusive bool
	// TTL is the lease's length; it is renewed every TTL/3. Default 10s.
	TTL time.Duration
	// Now is the wall clock stamped into the lease. Default time.Now.
	Now func() time.Time
	// Recover returns the highest timestamp the store's data holds. It is
	// called when the store has no mark yet, so that a store whose mark
	// was lost (or that predates it) never restarts timestamps below
	// what it holds. nil: a store without a mark is taken as empty.
	Recover func(ctx context.Context) (uint64, error)
	// Logger receives lease warnings. Default slog.Default().
	Logger *slog.Logger
}

func (o *StoreOptions) ensureDefaults() {
	o.AllocatorOptions.EnsureDefaults()
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *StoreOptions) validate() error {
	switch {
	case o.Owner == "":
		return fmt.Errorf("%w: empty Owner", ErrInvalidArgument)
	case o.TTL < 3*time.Millisecond:
		return fmt.Errorf("%w: lease TTL %v below 3ms", ErrInvalidArgument, o.TTL)
	}
	return o.AllocatorOptions.Validate()
}

// HeldError is OpenStoreAllocator's refusal while another live allocator
// holds the store's lease. It matches storage.ErrInUse.
type HeldError struct {
	Owner string    // the holder's owner ID (host/pid/random)
	Until time.Time // when its lease runs out unless renewed
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("oracle: the store's timestamp oracle is held by %s (lease until %s)", e.Owner, e.Until.Format(time.RFC3339))
}

// Is makes errors.Is(err, storage.ErrInUse) true.
func (e *HeldError) Is(target error) bool { return target == storage.ErrInUse }

// storeMark is the persister of a store allocator: the lease cell, held by
// this allocator from open to close, renewed in the background.
//
// Safety against a second allocator (DESIGN.md invariant 1): another
// allocator takes the lease only when, by its wall clock, the lease has run
// out (WallMS+TTLMS). This one hands out timestamps only while its
// monotonic clock is below the send time of its last confirmed lease write
// plus TTL·(1−drift), drift = 1/10: it stops before a taker whose wall
// clock runs within TTL/10 of this one (skew plus rate error) can take
// over. Assumed: wall clocks of the processes on a shared store agree
// within TTL/10, and the holder's monotonic clock advances while its
// machine runs (a suspended machine whose monotonic clock stops is a
// paused holder the bound does not cover). On a store the caller owns
// (StoreOptions.Exclusive) another holder has certainly stopped, and is
// taken over at once: that is what lets a restarted embedded store open
// without waiting.
//
// Concurrency: mu serializes writes of the cell (extension, renewal,
// release); usable reads only atomics.
type storeMark struct {
	st    storage.Store
	opts  StoreOptions
	clock time.Time // monotonic origin of deadline
	mu    sync.Mutex
	// Invariant (under mu): epoch is the version of the current record,
	// which this allocator wrote; mark is the mark in it.
	epoch, mark uint64
	// unsure is the nonce of this allocator's last write whose outcome it
	// never learned (0: none): found at epoch+1 later, it applied late and
	// is adopted, not taken for another allocator's.
	unsure uint64
	// deadline is when (nanoseconds after clock, monotonic) this
	// allocator must stop handing out timestamps unless renewed.
	deadline atomic.Int64
	lost     atomic.Pointer[error]
	stop     chan struct{}
	renewer  sync.WaitGroup
}

// OpenStoreAllocator opens the allocator whose mark lives in st (see
// storeMark): it takes the store's lease, resumes above the stored mark
// (or, for a store without one, above what Recover finds), and durably
// writes a mark Window ahead before returning. While another live
// allocator holds the lease it fails with an error wrapping
// storage.ErrInUse, naming the holder. Close releases the lease.
func OpenStoreAllocator(ctx context.Context, st storage.Store, opts StoreOptions) (*Allocator, error) {
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	m := &storeMark{st: st, opts: opts, clock: time.Now(), stop: make(chan struct{})}
	resume, err := m.acquire(ctx)
	if err != nil {
		return nil, err
	}
	a := &Allocator{opts: opts.AllocatorOptions, mark: m}
	a.mu.next = max(1, opts.start, resume)
	a.mu.limit = m.mark
	if a.mu.limit <= a.mu.next { // the window acquire wrote is used up by start
		if err := m.write(satAdd(a.mu.next, opts.Window)); err != nil {
			_ = m.close()
			return nil, err
		}
		a.mu.limit = m.mark
	}
	m.renewer.Add(1)
	go m.renew()
	return a, nil
}

// acquire takes the lease and returns where to resume: the mark of the
// previous holder.
func (m *storeMark) acquire(ctx context.Context) (uint64, error) {
	if err := m.migrate(ctx); err != nil {
		return 0, err
	}
	for range 3 {
		epoch, cur, found, err := m.read(ctx)
		switch {
		case err != nil:
			return 0, err
		case !found:
			resume, created, err := m.create(ctx)
			if err != nil || created {
				return resume, err
			}
			continue // another allocator created it first: judge its lease
		case m.heldByOther(&cur):
			return 0, &HeldError{Owner: cur.Owner, Until: time.UnixMilli(int64(cur.WallMS + cur.TTLMS))}
		}
		m.epoch, m.mark = epoch, cur.Mark
		resume := max(1, cur.Mark)
		if err := m.write(satAdd(resume, m.opts.Window)); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				m.lost.Store(nil) // raced with another taker: judge again
				continue
			}
			return 0, err
		}
		return resume, nil
	}
	return 0, fmt.Errorf("oracle: could not take the store's lease: %w", ErrLeaseLost)
}

// migrate moves a lease record a store keeps in legacyMarkRow into
// markRow: copied, at its epoch, only where markRow holds none (so a
// newer record there is never replaced), then deleted from legacyMarkRow.
// Both writes may be sent again after a lost reply, and a crash between
// them leaves a copy the next open skips, and a legacy cell it deletes.
func (m *storeMark) migrate(ctx context.Context) error {
	cell := storage.Filter{{Family: FamilyOracle, Qualifier: leaseQual, Limit: 1}}
	r, err := m.st.ReadRow(ctx, legacyMarkRow, cell)
	if err != nil || len(r.Cells) == 0 {
		return err
	}
	c := r.Cells[0]
	if _, err := decodeLease(c.Value); err != nil {
		return fmt.Errorf("oracle: moving the mark into the reserved row: %w", err)
	}
	anyCell := storage.Filter{{Family: FamilyOracle, Qualifier: leaseQual}}
	if _, err := m.st.CheckAndMutate(ctx, markRow, anyCell, nil, []storage.Mutation{storage.SetCell(FamilyOracle, leaseQual, c.TS, c.Value)}); err != nil {
		return fmt.Errorf("oracle: moving the mark into the reserved row: %w", err)
	}
	if err := m.st.Mutate(ctx, legacyMarkRow, storage.Mutation{Kind: storage.DeleteCells, Family: FamilyOracle, Qualifier: leaseQual}); err != nil {
		return fmt.Errorf("oracle: moving the mark into the reserved row: %w", err)
	}
	m.opts.Logger.Info("oracle: moved the store's mark into the reserved row", "epoch", c.TS)
	return nil
}

// create writes the first lease record of a store that has none, resuming
// above the highest timestamp its data holds. created is false when
// another allocator created it first.
func (m *storeMark) create(ctx context.Context) (resume uint64, created bool, err error) {
	if m.opts.Recover != nil {
		high, err := m.opts.Recover(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("oracle: recovering the mark from the store: %w", err)
		}
		if high > 0 {
			m.opts.Logger.Warn("oracle: the store has no timestamp mark; resuming above its newest timestamp", "timestamp", high)
		}
		resume = satAdd(high, 1)
	}
	resume = max(1, resume)
	rec := m.record(satAdd(resume, m.opts.Window))
	cell := storage.Filter{{Family: FamilyOracle, Qualifier: leaseQual}}
	exists, err := m.st.CheckAndMutate(ctx, markRow, cell, nil, []storage.Mutation{storage.SetCell(FamilyOracle, leaseQual, 1, encodeLease(&rec))})
	if err != nil || exists {
		return 0, false, err
	}
	m.epoch, m.mark = 1, rec.Mark
	m.confirm(time.Since(m.clock))
	return resume, true, nil
}

// heldByOther reports whether cur is a live lease of another owner: on a
// store the caller owns, never; otherwise until it expires by this
// allocator's wall clock. No liveness service may shorten it: the holder
// does not consult one, so a holder reported dead while it runs would go
// on handing out timestamps below the taker's.
func (m *storeMark) heldByOther(cur *leaseRecord) bool {
	if cur.Owner == "" || cur.Owner == m.opts.Owner || m.opts.Exclusive {
		return false
	}
	return uint64(m.opts.Now().UnixMilli()) <= cur.WallMS+cur.TTLMS
}

// read returns the current lease record and its epoch.
func (m *storeMark) read(ctx context.Context) (epoch uint64, rec leaseRecord, found bool, err error) {
	r, err := m.st.ReadRow(ctx, markRow, storage.Filter{{Family: FamilyOracle, Qualifier: leaseQual, Limit: 1}})
	if err != nil || len(r.Cells) == 0 {
		return 0, leaseRecord{}, false, err
	}
	rec, err = decodeLease(r.Cells[0].Value)
	return r.Cells[0].TS, rec, err == nil, err
}

func (m *storeMark) record(mark uint64) leaseRecord {
	return leaseRecord{Mark: mark, Owner: m.opts.Owner, WallMS: uint64(m.opts.Now().UnixMilli()),
		TTLMS: uint64(m.opts.TTL.Milliseconds()), Nonce: rand.Uint64()}
}

// write implements persister: it raises the mark, renewing the lease.
func (m *storeMark) write(mark uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.replaceLocked(m.record(max(mark, m.mark)))
}

// replaceLocked writes rec as the next epoch, on the exact current one.
// After an unknown outcome it reads the cell: its own nonce at the next
// epoch means the write applied. Anything else at another epoch means the
// lease was taken: it is lost for good. m.mu is held.
func (m *storeMark) replaceLocked(rec leaseRecord) error {
	if err := m.usableLost(); err != nil {
		return err
	}
	// The cell is replaced in place, so it takes no space to speak of,
	// and the oracle must go on handing out timestamps on a nearly full
	// disk (the garbage collector that frees space needs them): it may
	// use the store's reserve.
	ctx, cancel := context.WithTimeout(storage.WithReserve(context.Background()), m.opts.TTL)
	defer cancel()
	sent := time.Since(m.clock)
	val := encodeLease(&rec)
	var lastErr error
	for range 4 {
		matched, err := m.st.CheckAndMutate(ctx, markRow,
			storage.Filter{{Family: FamilyOracle, Qualifier: leaseQual, Time: storage.At(m.epoch)}},
			[]storage.Mutation{storage.SetCell(FamilyOracle, leaseQual, m.epoch+1, val), storage.DeleteCell(FamilyOracle, leaseQual, m.epoch)}, nil)
		if err == nil && matched {
			return m.appliedLocked(rec, sent)
		}
		epoch, cur, found, rerr := m.read(ctx)
		switch {
		case rerr != nil:
			lastErr = errors.Join(err, rerr)
			continue
		case found && epoch == m.epoch+1 && cur.Nonce == rec.Nonce:
			return m.appliedLocked(rec, sent) // an unknown outcome that applied
		case found && epoch == m.epoch+1 && m.unsure != 0 && cur.Nonce == m.unsure:
			// An earlier write of ours, given up on, applied late: adopt
			// it and send this one on top.
			m.epoch, m.mark, m.unsure = epoch, max(m.mark, cur.Mark), 0
			continue
		case found && epoch == m.epoch && err != nil:
			lastErr = err
			continue // not applied: send again
		}
		return m.loseLocked(fmt.Errorf("%w: the lease cell is at epoch %d (owner %q), not %d", ErrLeaseLost, epoch, cur.Owner, m.epoch))
	}
	m.unsure = rec.Nonce
	return fmt.Errorf("oracle: writing the store's mark: %w", lastErr)
}

func (m *storeMark) appliedLocked(rec leaseRecord, sent time.Duration) error {
	m.epoch++
	m.mark, m.unsure = rec.Mark, 0
	if rec.Owner != "" {
		m.confirm(sent)
	}
	return nil
}

// confirm extends the deadline to sent + TTL·(1−1/10).
func (m *storeMark) confirm(sent time.Duration) {
	m.deadline.Store(int64(sent + m.opts.TTL - m.opts.TTL/10))
}

func (m *storeMark) loseLocked(err error) error {
	m.lost.CompareAndSwap(nil, &err)
	m.opts.Logger.Error("oracle: lost the store's lease; this allocator hands out no more timestamps", "err", err)
	return err
}

func (m *storeMark) usableLost() error {
	if p := m.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// usable implements persister.
func (m *storeMark) usable() error {
	if err := m.usableLost(); err != nil {
		return err
	}
	if int64(time.Since(m.clock)) >= m.deadline.Load() {
		return fmt.Errorf("%w: not renewed within its TTL (%v)", ErrLeaseLost, m.opts.TTL)
	}
	return nil
}

// renew rewrites the lease every TTL/3 until close.
func (m *storeMark) renew() {
	defer m.renewer.Done()
	t := time.NewTicker(m.opts.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		err := m.replaceLocked(m.record(m.mark))
		m.mu.Unlock()
		if errors.Is(err, ErrLeaseLost) {
			return
		}
		if err != nil {
			m.opts.Logger.Warn("oracle: renewing the store's lease", "err", err)
		}
	}
}

// close implements persister: it stops renewing and releases the lease,
// keeping the mark, so the next allocator takes over at once.
func (m *storeMark) close() error {
	close(m.stop)
	m.renewer.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.usableLost() != nil {
		return nil
	}
	rec := m.record(m.mark)
	rec.Owner = ""
	return m.replaceLocked(rec)
}
