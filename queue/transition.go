package queue

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

func epochValue(e uint64) []byte { return binary.BigEndian.AppendUint64(nil, e) }

// key is the index entry key of item id's state st.
func (st *state) key(id string) string { return entryKey(st.At, id, st.Req) }

// writeEntry writes the index entry of an item's next state (its epoch
// as the value). It brings this process's cursor back to it if it lies
// behind: a process finds its own entries at once. A lazy write may
// return before it is durable, on a store whose writes share one ordered
// log (storage.Deferred): the caller's next durable write covers it.
// Idempotent: the key names one state (its request id) and the value is
// fixed, so a late copy at most brings back an entry already stale,
// which whoever finds it deletes.
func (q *Queue) writeEntry(ctx context.Context, name, id string, next *state, epoch uint64, lazy bool) error {
	key := next.key(id)
	if err := q.mutate(ctx, lazy, entryRow(name, key), storage.SetCell(Family, qualEntry, 0, epochValue(epoch))); err != nil {
		return err
	}
	q.mu.Lock()
	c := q.cursors[name]
	q.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		if key < c.local {
			c.local = key
		}
		c.mu.Unlock()
	}
	return nil
}

// deleteEntry deletes an entry that is stale or about to be: lazily, as
// one that outlives a crash is stale and deleted by whoever finds it.
// Its one cell, not the row: a row deletion costs a store that keeps
// indexes of its rows (a DB's transactions' cell index) a pass over them.
// Idempotent: the key names one state, never written again once that
// state is gone, so a late copy deletes nothing live.
func (q *Queue) deleteEntry(ctx context.Context, name, key string) error {
	return q.retry(ctx, func() error {
		return q.mutate(ctx, true, entryRow(name, key), storage.DeleteCell(Family, qualEntry, 0))
	})
}

// mutate is Mutate, or when lazy and the store can, its deferred variant.
func (q *Queue) mutate(ctx context.Context, lazy bool, row []byte, ms ...storage.Mutation) error {
	if !lazy || q.deferred == nil {
		return q.store.Mutate(ctx, row, ms...)
	}
	errs, err := q.deferred.MutateRowsDeferred(ctx, []storage.RowMutation{{Row: row, Mutations: ms}})
	if err == nil && errs != nil {
		err = errs[0]
	}
	return err
}

// retry runs an idempotent store call until it succeeds, up to attempts
// times when it fails for a reason that may pass.
func (q *Queue) retry(ctx context.Context, call func() error) error {
	var err error
	for try := 0; try < attempts; try++ {
		if err = call(); err == nil || !transient(ctx, err) {
			return err
		}
	}
	return err
}

// transient reports whether a store call that failed with err may
// succeed if sent again: not for bad input, a closed store or an ended
// context.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, storage.ErrInvalidArgument) && !errors.Is(err, storage.ErrClosed)
}

// attempts bounds the sends of one store call that keeps failing.
const attempts = 8

// unknown wraps the error of a write whose outcome stayed unknown.
func unknown(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnknown, what, err)
}

// stamp gives a state's entry time from bounds on the store's clock.
type stamp func(lo, hi int64) int64

// placeEntry writes the index entry of next (at epoch), its time stamped
// by at from a fresh reading of the store's clock, and makes sure it
// landed in time: within Grace of the reading, or before its own time
// plus Grace. The shared cursor stays twice Grace behind the store's
// time, so such an entry lands ahead of it. One that lands later may lie
// behind it, where no look would find it: it is deleted and written anew
// from a fresh reading (a later time for the state: a leased item's
// expiry only moves later, so its worker's deadline, measured from an
// earlier send, stays before it).
func (q *Queue) placeEntry(ctx context.Context, name, id string, next *state, epoch uint64, at stamp) error {
	for round := 0; ; round++ {
		if round == attempts {
			return fmt.Errorf("queue %s: item %s: the store's writes take longer than Grace (%v); raise Options.Grace", name, id, q.opts.Grace)
		}
		l0 := time.Now()
		lo, hi, err := q.clock.bounds(ctx)
		if err != nil {
			return err
		}
		next.At = at(lo, hi)
		// Lazy: the state's durable write, after it, covers it.
		if err := q.retry(ctx, func() error { return q.writeEntry(ctx, name, id, next, epoch, true) }); err != nil {
			return err
		}
		if time.Since(l0)+time.Duration(hi-lo)*time.Millisecond < time.Duration(next.At-lo)*time.Millisecond+q.opts.Grace {
			return nil
		}
		_ = q.deleteEntry(ctx, name, next.key(id))
	}
}

// transition moves item id from its state at epoch to next (at epoch+1),
// stamping next's entry time (next.At) with at (nil: a dead letter,
// which has no entry). The next state's entry is placed first (so that every state
// but dead has its entry: a crash leaves at most an entry too many),
// then the state is written by CheckAndMutate on epoch, then the old
// entry (oldKey) goes. extra are more mutations of the item row.
//
// The state's write applies at most once however often it is sent, and a
// late copy changes nothing: it is conditioned on the version epoch,
// which every change deletes. Whenever its reply does not say it applied
// (an error, or the predicate not matching, which a re-send whose first
// copy applied also sees), the item is read: next.Req in the state at
// epoch+1 means it applied. It reports whether it applied and, when not,
// the item as read (moved on from epoch). An outcome that stays unknown
// is an error wrapping ErrUnknown; its entry stays, to be fenced off if
// the write never applies.
func (q *Queue) transition(ctx context.Context, name, id string, epoch uint64, next *state, at stamp, oldKey string, extra ...storage.Mutation) (bool, item, error) {
	if at != nil {
		if err := q.placeEntry(ctx, name, id, next, epoch+1, at); err != nil {
			return false, item{}, err
		}
	}
	b, _ := json.Marshal(next)
	muts := append([]storage.Mutation{
		storage.SetCell(Family, qualState, epoch+1, b),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualState, Time: storage.Before(epoch + 1)},
	}, extra...)
	pred := storage.Filter{{Family: Family, Qualifier: qualState, Time: storage.At(epoch), Limit: 1}}
	applied, cur, err := q.writeState(ctx, name, id, epoch, next.Req, func() (bool, error) {
		return q.store.CheckAndMutate(ctx, itemRow(name, id), pred, muts, nil)
	})
	if err != nil {
		return false, item{}, err
	}
	if !applied {
		if at != nil { // our entry names a state that never was
			_ = q.deleteEntry(ctx, name, next.key(id))
		}
		return false, cur, nil
	}
	if oldKey != "" {
		_ = q.deleteEntry(ctx, name, oldKey) // a leftover is stale and found so
	}
	return true, item{}, nil
}

// writeState sends a state write (send reports whether its predicate
// matched, which for these writes means applied) until its outcome is
// known: applied, or not because the item moved on from epoch (cur). A
// write is found applied by its request id req in the state at epoch+1.
// An outcome still unknown after attempts sends is an error wrapping
// ErrUnknown.
func (q *Queue) writeState(ctx context.Context, name, id string, epoch, req uint64, send func() (bool, error)) (applied bool, cur item, err error) {
	maybe := false // a send may have applied unseen
	for tries := 1; ; tries++ {
		matched, serr := send()
		if serr == nil && matched {
			return true, item{}, nil
		}
		maybe = maybe || (serr != nil && transient(ctx, serr))
		it, rerr := q.readItem(ctx, name, id, false)
		switch {
		case rerr == nil && it.epoch == epoch+1 && it.st.Req == req:
			return true, item{}, nil // a copy applied; its reply was lost
		case rerr == nil && it.epoch != epoch:
			return false, it, nil // moved on: this write can no longer apply
		}
		err = errors.Join(serr, rerr)
		if err == nil {
			err = fmt.Errorf("queue %s: item %s: state write unmatched, yet still at epoch %d", name, id, epoch)
		}
		if tries == attempts || !transient(ctx, err) {
			if maybe {
				return false, item{}, unknown(fmt.Sprintf("queue %s: item %s: state change", name, id), err)
			}
			return false, item{}, err
		}
	}
}

func newReq() uint64 { return rand.Uint64() | 1 }
