package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/seed-992972ee/percolator/storage"
)

// Item states.
const (
	stReady  = "ready"
	stLeased = "leased"
	stAcked  = "acked"
	stDead   = "dead"
	// stVoid: a push fenced off before its item was written (its entry
	// waited longer than twice Grace): no item; the row goes, as an acked
	// one, at its entry's time.
	stVoid = "void"
)

// state is an item's state cell. Every change writes it at the next
// version (its epoch) by CheckAndMutate on the current one, so a version
// names one content: a call conditioned on the epoch it read is
// conditioned on all of it.
type state struct {
	St    string `json:"st"`
	Lease uint64 `json:"lease,omitempty"` // the current (leased) or last lease
	At    int64  `json:"at,omitempty"`    // ms: the time of the state's index entry (ready: visible; leased: expiry; acked, void: removal)
	Req   uint64 `json:"req"`             // the request that wrote the state; names its index entry
	N     int    `json:"n,omitempty"`     // deliveries so far
}

// item is an item row as read.
type item struct {
	epoch uint64 // 0: no item
	st    state
	body  []byte
}

var itemFilter = storage.Filter{
	{Family: Family, Qualifier: qualState, Limit: 1},
	{Family: Family, Qualifier: qualBody, Limit: 1},
}

var stateFilter = storage.Filter{{Family: Family, Qualifier: qualState, Limit: 1}}

func (q *Queue) readItem(ctx context.Context, name, id string, withBody bool) (item, error) {
	f := stateFilter
	if withBody {
		f = itemFilter
	}
	r, err := q.store.ReadRow(ctx, itemRow(name, id), f)
	if err != nil {
		return item{}, err
	}
	var it item
	for _, c := range r.Cells {
		switch c.Qualifier {
		case qualState:
			if json.Unmarshal(c.Value, &it.st) != nil {
				return item{}, fmt.Errorf("queue %s: item %s: corrupt state", name, id)
			}
			it.epoch = c.TS
		case qualBody:
			it.body = c.Value
		}
	}
	return it, nil
}

func newReq() uint64 { return rand.Uint64() | 1 }
