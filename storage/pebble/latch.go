package pebble

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/seed-992972ee/percolator/storage"
)

// latchStripes is the number of row latches. Rows hash onto stripes; two
// rows sharing a stripe only serialize, they never deadlock.
const latchStripes = 4096

// latches serialize the writes of a row: the predicate read, the batch and
// the durable commit of each write happen under its row's latch, as
// CockroachDB latches requests above Pebble. Reads take no latch: a pebble
// batch commits atomically, so a reader sees all of a write or none.
//
// A durable write holds its latches until its batch is applied and
// published, not until its log sync returns: it records itself as its
// stripes' sync in flight (syncs) before it applies the batch, releases
// the latches, and only then waits for the sync. A deferred write of the
// row (a roll-forward, a prewrite) then reads the published
// state under the latch and goes on without waiting for that sync: it
// is durable with the next sync, which covers the earlier write too
// (pebble's WAL is one ordered log). The next durable write of the row
// waits for that sync before it takes the latches for good (lockRows).
// A reader that returns a row first waits for the sync in flight on the
// row's stripe (Store.settle), if that write put or deleted a cell the
// read selects: a read of other columns, or of older versions, of a row
// whose commit record is syncing returns at once. It never waits for
// the writers queued on the latch.
//
// Every wait honours the caller's context: a latch is a one-slot channel,
// not a mutex, so that a write queued behind a commit whose log sync
// hangs (a stalled disk) and a read settling behind it return the
// context's error when it ends, holding nothing and having changed
// nothing. (A sync.Mutex cannot be given up on: a Get with a 200ms
// deadline waited as long as the sync did.) A durable write whose batch
// is applied cannot be abandoned: its batch is published; it returns
// when its sync does (Store.commitBatch).
type latches struct {
	seed maphash.Seed
	// mu are the stripes' latches: a stripe is held while its channel
	// holds a token. Waiters queue in FIFO order on the send.
	mu [latchStripes]chan struct{}
	// syncs is, per stripe, the durable write applied there whose log
	// sync has not returned, or nil: at most one (lockStripes). Invariant:
	// set under the stripe's latch before the batch is applied; cleared
	// once its sync returned and, if it failed, after the store was
	// failed.
	syncs [latchStripes]atomic.Pointer[inflightSync]
	// anySyncing counts the durable writes whose sync is in flight,
	// raised before their syncs entries are set and lowered after they
	// are cleared: a read of a store with no sync in flight skips
	// hashing its row.
	anySyncing atomic.Int32
	// committing counts the one-phase commits in flight per stripe
	// (onephase.go). Invariant: raised under the stripe's latch before
	// the commit's timestamp is taken, lowered after its write returned
	// (visible and durable), still under the latch.
	committing [latchStripes]atomic.Int32
	// anyCommitting counts them all, raised first and lowered last.
	anyCommitting atomic.Int32
	// commitWake is, per stripe, the channel readers wait on for the
	// one-phase commit in flight there: made by the first reader that
	// waits, closed and cleared by the commit once it lowered its mark,
	// before it releases the latch (wakeStripe).
	commitWake [latchStripes]atomic.Pointer[chan struct{}]
}

// inflightSync is a durable write whose batch is applied and whose log
// sync has not returned: the channel doneCh returns is closed once it
// has (and, if it failed, after the store was failed). rows are its rows
// and mutations, copied without their values: a reader may look at them
// after the write's caller got its slices back.
type inflightSync struct {
	// done is nil until a waiter makes the channel (most syncs have
	// none), and closedChan once finish ran.
	done atomic.Pointer[chan struct{}]
	rows []storage.RowMutation
	// The storage of rows for a write of one row and one mutation, the
	// common one: one allocation instead of three.
	oneRow [1]storage.RowMutation
	oneMut [1]storage.Mutation
}

// closedChan is a closed channel: a finished sync's done.
var closedChan = func() *chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return &ch
}()

// doneCh returns a channel closed once p's sync returned.
func (p *inflightSync) doneCh() <-chan struct{} {
	for {
		if ch := p.done.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if p.done.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// finish marks p's sync as returned: the channel a waiter made, if one
// did, is closed, and any later doneCh returns a closed one.
func (p *inflightSync) finish() {
	if ch := p.done.Swap(closedChan); ch != nil && ch != closedChan {
		close(*ch)
	}
}

// touches reports whether the write may change what filter selects in
// row (storage.Filter.Touches).
func (p *inflightSync) touches(row []byte, filter storage.Filter) bool {
	for i := range p.rows {
		if !bytes.Equal(p.rows[i].Row, row) {
			continue
		}
		for j := range p.rows[i].Mutations {
			if filter.Touches(&p.rows[i].Mutations[j]) {
				return true
			}
		}
	}
	return false
}

// touchesRange is touches for every row in [lo, hi) (hi nil: no end).
func (p *inflightSync) touchesRange(lo, hi []byte, filter storage.Filter) bool {
	for i := range p.rows {
		if row := p.rows[i].Row; bytes.Compare(row, lo) >= 0 && (hi == nil || bytes.Compare(row, hi) < 0) && p.touches(row, filter) {
			return true
		}
	}
	return false
}

// shapes copies rows, their mutations without values, into p.rows.
func (p *inflightSync) shapes(rows []storage.RowMutation) {
	if len(rows) == 1 && len(rows[0].Mutations) == 1 {
		p.oneMut[0] = rows[0].Mutations[0]
		p.oneMut[0].Value = nil
		p.oneRow[0] = storage.RowMutation{Row: bytes.Clone(rows[0].Row), Mutations: p.oneMut[:]}
		p.rows = p.oneRow[:]
		return
	}
	n := 0
	for i := range rows {
		n += len(rows[i].Mutations)
	}
	muts := make([]storage.Mutation, 0, n)
	out := make([]storage.RowMutation, len(rows))
	for i := range rows {
		start := len(muts)
		for _, m := range rows[i].Mutations {
			m.Value = nil
			muts = append(muts, m)
		}
		out[i] = storage.RowMutation{Row: bytes.Clone(rows[i].Row), Mutations: muts[start:len(muts):len(muts)]}
	}
	p.rows = out
}

// hold is the latches one write holds. release unlatches them once, after
// running before (a one-phase commit lowers its marks there): a durable
// write calls it as soon as its batch is applied, before it waits for its
// sync, and every write defers it for its other returns.
type hold struct {
	l       *latches
	stripes []int
	before  func()
	done    bool
}

func (h *hold) release() {
	if h.done {
		return
	}
	h.done = true
	if h.before != nil {
		h.before()
	}
	h.l.unlock(h.stripes...)
}

func newLatches() *latches {
	l := &latches{seed: maphash.MakeSeed()}
	for i := range l.mu {
		l.mu[i] = make(chan struct{}, 1)
	}
	return l
}

func (l *latches) stripe(row []byte) int {
	return int(maphash.Bytes(l.seed, row) % latchStripes)
}

// acquire takes stripe i's latch, or returns ctx's error if ctx ends
// first (the latch not taken).
func (l *latches) acquire(ctx context.Context, i int) error {
	select {
	case l.mu[i] <- struct{}{}:
		return nil
	default:
	}
	select {
	case l.mu[i] <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockRow latches one row and returns the hold to release; or ctx's
// error, holding nothing (lockStripes).
func (l *latches) lockRow(ctx context.Context, row []byte, durable bool) (*hold, error) {
	return l.lockStripes(ctx, []int{l.stripe(row)}, durable)
}

// lockRows latches every row in ascending stripe order (so two callers can
// never wait on each other in a cycle) and returns the hold to release;
// or ctx's error, having released the stripes it took (lockStripes).
func (l *latches) lockRows(ctx context.Context, rows []storage.RowMutation, durable bool) (*hold, error) {
	stripes := make([]int, 0, len(rows))
	for i := range rows {
		stripes = append(stripes, l.stripe(rows[i].Row))
	}
	slices.Sort(stripes)
	return l.lockStripes(ctx, slices.Compact(stripes), durable)
}

// lockStripes latches stripes, sorted and distinct, in order. A durable
// write (durable set) takes its latches only once no earlier durable
// write of its stripes still waits for its log sync: finding one, it
// releases them, waits for that sync, and starts again. So durable
// writes of a stripe enter pebble one at a time, as when they queued on
// the latch through each other's syncs, and one queued behind a sync
// that fails returns the store's failure (Store.latched) instead of
// going on into a pebble whose log is broken (whose next rotation would
// panic the process); deferred writes (roll-forwards among them), the
// conditional calls that write nothing (a reader's push, kept in its
// client's memory), and readers wait for no sync of the row's writes.
func (l *latches) lockStripes(ctx context.Context, stripes []int, durable bool) (*hold, error) {
	for {
		for n, i := range stripes {
			if err := l.acquire(ctx, i); err != nil {
				l.unlock(stripes[:n]...)
				return nil, err
			}
		}
		h := &hold{l: l, stripes: stripes}
		if !durable {
			return h, nil
		}
		if err := h.awaitSyncs(ctx); err != errRelatch {
			return h, err
		}
	}
}

// errRelatch is awaitSyncs's word to take the latches again.
var errRelatch = errors.New("pebble: latch again")

// awaitSyncs returns nil, holding h, when no durable write of h's
// stripes waits for its sync; otherwise it releases h, waits for the
// sync and returns errRelatch (or, holding nothing, ctx's
// error).
func (h *hold) awaitSyncs(ctx context.Context) error {
	if h.l.anySyncing.Load() == 0 {
		return nil
	}
	for _, i := range h.stripes {
		p := h.l.syncs[i].Load()
		if p == nil {
			continue
		}
		h.release()
		select {
		case <-p.doneCh():
			return errRelatch
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (l *latches) unlock(stripes ...int) {
	for _, i := range stripes {
		<-l.mu[i]
	}
}

// wait returns once no durable write that was applied on row's stripe
// before it was called, and that may change what filter selects in row,
// is still waiting for its log sync; or ctx's error if ctx ends first. A
// stripe has at most one durable write waiting for its sync (lockRows),
// its syncs entry: a read returns at once unless that one wrote a cell
// the read selects.
func (l *latches) wait(ctx context.Context, row []byte, filter storage.Filter) error {
	if l.anySyncing.Load() == 0 {
		return nil
	}
	p := l.syncs[l.stripe(row)].Load()
	if p == nil || !p.touches(row, filter) {
		return nil
	}
	select {
	case <-p.doneCh():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitRange is wait for every row in [lo, hi) (hi nil: no end), a scan
// chunk's: the rows it returns, and the rows it does not because a
// write whose sync is in flight deleted their selected cells, which a
// power loss would bring back.
func (l *latches) waitRange(ctx context.Context, lo, hi []byte, filter storage.Filter) error {
	if l.anySyncing.Load() == 0 {
		return nil
	}
	for i := range l.syncs {
		p := l.syncs[i].Load()
		if p == nil || !p.touchesRange(lo, hi, filter) {
			continue
		}
		select {
		case <-p.doneCh():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// beginSync records a durable write about to be applied to rows as
// their stripes' sync in flight. The caller holds every row's
// latch.
func (l *latches) beginSync(rows []storage.RowMutation) *inflightSync {
	p := &inflightSync{}
	p.shapes(rows)
	l.anySyncing.Add(1)
	for i := range rows {
		l.syncs[l.stripe(rows[i].Row)].Store(p)
	}
	return p
}

// endSync marks p's sync as returned (after the store was failed, if it
// failed): its waiters go on, and its stripes forget it.
func (l *latches) endSync(p *inflightSync, rows []storage.RowMutation) {
	p.finish()
	for i := range rows {
		l.syncs[l.stripe(rows[i].Row)].CompareAndSwap(p, nil)
	}
	l.anySyncing.Add(-1)
}

// awaitMark returns once the write that held mark up when it was called
// has lowered it (at once if the mark is down), or ctx's error. A stripe
// has one marked write at a time, its latch's holder, which lowers its
// mark and then wakes (closes the channel in wake) before it releases
// the latch (hold.before). The reader's channel is in wake before it
// reads the mark up for the last time, so either the write that raised
// that mark closes it, or the reader read the mark after that write
// lowered it: then the mark it read is a later write's (the latch's next
// holder), which closes it in turn: the wait is at most one write longer.
func awaitMark(ctx context.Context, mark *atomic.Int32, wake *atomic.Pointer[chan struct{}]) error {
	if mark.Load() == 0 {
		return nil
	}
	p := wake.Load()
	for p == nil {
		ch := make(chan struct{})
		if wake.CompareAndSwap(nil, &ch) {
			p = &ch
		} else {
			p = wake.Load()
		}
	}
	if mark.Load() == 0 {
		return nil
	}
	select {
	case <-*p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wakeStripe closes and clears the channel readers of a stripe's mark
// wait on, if any: the marked write calls it once it lowered its mark,
// still holding the stripe's latch.
func wakeStripe(wake *atomic.Pointer[chan struct{}]) {
	if p := wake.Swap(nil); p != nil {
		close(*p)
	}
}

// markCommitting raises (delta 1) or lowers (delta -1) stripe i's count
// of one-phase commits in flight.
func (l *latches) markCommitting(i int, delta int32) {
	if delta > 0 {
		l.anyCommitting.Add(1)
	}
	l.committing[i].Add(delta)
	if delta < 0 {
		wakeStripe(&l.commitWake[i])
		l.anyCommitting.Add(-1)
	}
}

// awaitCommit returns once no one-phase commit that was in flight on
// row's stripe when it was called is still in flight (awaitMark: the
// commit lowers its mark once its write returned, still under the
// latch), or ctx's error. A read calls it before reading: a commit whose timestamp was
// handed out before the reader's was marked before, so the reader finds
// its write (txn/doc.go, "One-phase commit").
func (l *latches) awaitCommit(ctx context.Context, row []byte) error {
	if l.anyCommitting.Load() == 0 {
		return nil
	}
	return l.awaitStripeCommit(ctx, l.stripe(row))
}

// awaitAllCommits is awaitCommit for every row: a scan's.
func (l *latches) awaitAllCommits(ctx context.Context) error {
	if l.anyCommitting.Load() == 0 {
		return nil
	}
	for i := range l.committing {
		if err := l.awaitStripeCommit(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (l *latches) awaitStripeCommit(ctx context.Context, i int) error {
	return awaitMark(ctx, &l.committing[i], &l.commitWake[i])
}
