package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
)

// Push adds an item with body to queue name, ordered by the store's time
// of the push, and returns its ID.
//
// A store call whose reply is lost is sent again and recognised, never
// doubled. If Push cannot learn whether its item was written (the store
// kept failing, or ctx ended, after the item's write was sent), it
// returns the item's ID with an error wrapping ErrUnknown: send it again
// with PushAgain and that ID, not with Push, which would push a second
// item. An error with an empty ID means no item was written.
func (q *Queue) Push(ctx context.Context, name string, body []byte) (string, error) {
	if err := checkPush(name, body); err != nil {
		return "", err
	}
	return q.push(ctx, name, "", body)
}

// PushAgain sends again the push of item id with body (an ID that Push
// returned with an error wrapping ErrUnknown) and returns the item's ID:
// if the earlier push wrote the item (or it has been delivered, acked or
// dead-lettered since, while its mark is kept: Options.Retention), it
// changes nothing; if it did not, it pushes the item now, under id, or
// under a new ID if the earlier push was fenced off (its entry waited
// longer than twice Grace).
func (q *Queue) PushAgain(ctx context.Context, name, id string, body []byte) (string, error) {
	if err := checkPush(name, body); err != nil {
		return "", err
	}
	if err := checkID(id); err != nil {
		return "", err
	}
	return q.push(ctx, name, id, body)
}

func checkPush(name string, body []byte) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if len(body) > MaxBodySize {
		return fmt.Errorf("%w: body of %d bytes exceeds %d", ErrInvalidArgument, len(body), MaxBodySize)
	}
	return nil
}

// push writes item id (a new one if id is ""): its entry first, then
// the item, created only if its row has no state. A crash between leaves
// an entry without an item, which a look fences off (writing a void
// state in its place) once it is older than twice Grace, so that a push
// still on its way can no longer create the item behind a deleted entry.
func (q *Queue) push(ctx context.Context, name, id string, body []byte) (string, error) {
	given := id != ""
	for round := 0; round < attempts; round++ {
		var first int64
		if id == "" {
			lo, _, err := q.clock.bounds(ctx)
			if err != nil {
				return "", err
			}
			id, first = q.newID(lo)
		}
		st := state{St: stReady, Req: newReq()}
		if err := q.placeEntry(ctx, name, id, &st, 1, func(lo, _ int64) int64 { return max(lo, first) }); err != nil {
			if given {
				return id, err // an earlier push may have written it
			}
			return "", err // no item write was sent
		}
		it, err := q.create(ctx, name, id, st, body)
		if err != nil {
			if given || errors.Is(err, ErrUnknown) {
				return id, err
			}
			return "", err // no item write applied
		}
		if it.epoch != 1 || it.st.Req != st.Req {
			_ = q.deleteEntry(ctx, name, st.key(id)) // stale: the item's state is not the one it names
		}
		if it.st.St != stVoid {
			return id, nil // this push, or an earlier one of id: pushed
		}
		id, given = "", false // fenced off: push under a new ID
	}
	return "", fmt.Errorf("queue %s: pushes fenced off %d times in a row: the store's writes take longer than twice Grace (%v); raise Options.Grace", name, attempts, q.opts.Grace)
}

// create writes item id at epoch 1 in state st, with body (none if
// nil), if its row has no state, and returns the item as read after:
// st's state at epoch 1 (this write, or an earlier send of it), another
// push's of the same id, a fence's void, or any later state. Conditioned
// on the state's absence, the write applies at most once, and a late copy
// changes nothing once any state is there (an acked item keeps one for
// Retention; a copy delayed past that would push the item again).
func (q *Queue) create(ctx context.Context, name, id string, st state, body []byte) (item, error) {
	b, _ := json.Marshal(st)
	muts := []storage.Mutation{storage.SetCell(Family, qualState, 1, b)}
	if body != nil {
		muts = append(muts, storage.SetCell(Family, qualBody, 0, body))
	}
	maybe := false // a send may have applied unseen
	for tries := 1; ; tries++ {
		_, serr := q.store.CheckAndMutate(ctx, itemRow(name, id), stateFilter, nil, muts)
		maybe = maybe || (serr != nil && transient(ctx, serr))
		// The reply's "matched" cannot tell a state that an earlier send
		// of this write wrote from another's: the state tells.
		it, rerr := q.readItem(ctx, name, id, false)
		if rerr == nil && it.epoch != 0 {
			return it, nil
		}
		err := errors.Join(serr, rerr)
		if err == nil {
			err = fmt.Errorf("queue %s: item %s: written, then not found", name, id)
		}
		if tries >= attempts || !transient(ctx, err) {
			if maybe {
				return item{}, unknown(fmt.Sprintf("queue %s: item %s: push", name, id), err)
			}
			return item{}, err
		}
	}
}
