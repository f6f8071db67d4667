package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

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
