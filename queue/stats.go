package queue

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// Metrics are a Queue's counts since New.
type Metrics struct {
	Pops         uint64 // deliveries returned
	Empty        uint64 // looks that found nothing to deliver
	Scans        uint64 // index scans
	KeysVisited  uint64 // stored keys the scans visited (storage.Counted; 0 when the store cannot count)
	Conflicts    uint64 // claims lost to another worker
	DeadLettered uint64 // items this Queue moved to the dead letters
}

// Metrics returns the counts since New.
func (q *Queue) Metrics() Metrics {
	m := &q.metrics
	return Metrics{Pops: m.pops.Load(), Empty: m.empty.Load(), Scans: m.scans.Load(), KeysVisited: m.visited.Load(),
		Conflicts: m.conflicts.Load(), DeadLettered: m.deadLettered.Load()}
}

// Stats is a queue's contents as Stats counts them.
type Stats struct {
	Depth     int           // items waiting: pushed, nacked or requeued, or with their lease expired
	InFlight  int           // items under a live lease
	Dead      int           // dead letters
	Oldest    time.Duration // age of the oldest item waiting or in flight (by its push)
	Now       time.Time     // the store's clock when counted
	Retained  int           // acked items whose mark is still kept (Options.Retention)
	IndexKeys uint64        // stored keys of the queue's index a full scan visits (storage.Counted)
}

// Stats counts queue name's items (reading each item's state: an
// operator's call, not a worker's).
func (q *Queue) Stats(ctx context.Context, name string) (Stats, error) {
	if err := CheckName(name); err != nil {
		return Stats{}, err
	}
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Now: time.UnixMilli(lo)}
	p := prefix(name) + "i"
	oldest := ""
	err = q.store.Scan(ctx, []byte(p), []byte(p+"\xff"), stateFilter, 0, func(r storage.Row) bool {
		var s state
		if len(r.Cells) == 0 || json.Unmarshal(r.Cells[0].Value, &s) != nil {
			return true
		}
		id := strings.TrimPrefix(string(r.Key), p)
		if st.count(&s, lo) && (oldest == "" || id < oldest) {
			oldest = id
		}
		return true
	})
	if err != nil {
		return Stats{}, err
	}
	if oldest != "" {
		st.Oldest = st.Now.Sub(PushedAt(oldest))
	}
	if q.counted != nil {
		vp := prefix(name) + "v"
		st.IndexKeys, err = q.counted.ScanCounted(ctx, []byte(vp), []byte(vp+"\xff"), storage.Filter{{Family: Family, Qualifier: qualEntry, Limit: 1}}, 0, func(storage.Row) bool { return true })
	}
	return st, err
}

// count counts an item in state s (lo: the low bound of the store's time
// now), and reports whether it is waiting or in flight (it counts for
// Oldest).
func (st *Stats) count(s *state, lo int64) bool {
	switch {
	case s.St == stDead:
		st.Dead++
		return false
	case s.St == stAcked:
		st.Retained++
		return false
	case s.St == stVoid: // a push fenced off: no item
		return false
	case s.St == stLeased && s.At > lo:
		st.InFlight++
	default:
		st.Depth++
	}
	return true
}
