package queue

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/storage"
)

// Errors. Bad input wraps ErrInvalidArgument and changes nothing.
var (
	ErrInvalidArgument = errors.New("queue: invalid argument")
	// ErrNotHeld: the delivery's lease is not the item's current one (it
	// expired and the item was delivered again, or it was acked or
	// nacked).
	ErrNotHeld = errors.New("queue: item not held under this lease")
	// ErrNotDead: Requeue of an item that is not in the dead letters.
	ErrNotDead = errors.New("queue: item is not a dead letter")
	// ErrNoClock: the store has no clock of its own (storage.Clock).
	ErrNoClock = errors.New("queue: the store has no clock (storage.Clock)")
	// ErrUnknown: a call could not learn whether its write applied (the
	// store kept failing, or the context ended, after the write was
	// sent). Push returns the item's ID with it, to be sent again with
	// PushAgain.
	ErrUnknown = errors.New("queue: outcome unknown (the write may have applied)")
)

// Family holds every cell of the queues.
const Family = "queue"

// Limits.
const (
	MaxNameSize = 512
	MaxBodySize = 1 << 20
)

// Cells.
const (
	qualBody   = "b" // an item's body (version 0)
	qualState  = "s" // an item's state, at the version of its epoch
	qualEntry  = "e" // an index entry: the epoch it was written for (8 bytes)
	qualCursor = "p" // the shared cursor, at the version of its turn
	qualDead   = "d" // a dead letter's mark
)

// Options configures a Queue. The zero value is the defaults.
type Options struct {
	// MaxDeliveries is how many times an item is delivered before it
	// moves to the dead letters; 0 means 5.
	MaxDeliveries int
	// Drift is ρ, the relative drift of this process's monotonic clock
	// against the store's that a lease tolerates: a worker stops acting
	// at its Pop's send time + TTL × (1 − Drift) (Delivery.Valid). 0
	// means 0.01.
	Drift float64
	// Grace is L, the longest an index entry's write may take from the
	// clock reading its time came from (past that time) to its reply
	// before the writer deletes it and writes it anew from a fresh
	// reading; the shared cursor stays twice Grace behind the store's
	// time, and an entry written for a state change that has not applied
	// after twice Grace is fenced off (the change can no longer apply)
	// and deleted. 0 means 2s.
	Grace time.Duration
	// CatchUp is how often the shared cursor is advanced (by one
	// process at a time); entries written late are delivered within
	// Grace + CatchUp. 0 means 1s.
	CatchUp time.Duration
	// Retention is how long an acked item's mark stays (a re-sent Ack or
	// PushAgain finds it there: a PushAgain after it is gone pushes the
	// item again); 0 means 1 minute.
	Retention time.Duration
	// MaxBackOff bounds an idle Pop's wait between looks; 0 means 100ms.
	MaxBackOff time.Duration
}

// Queue is a set of named work queues kept in a store. Safe for
// concurrent use; any number of Queues, in any processes, share a store.
type Queue struct {
	store    storage.Store
	counted  storage.Counted  // nil when the store cannot count
	deferred storage.Deferred // nil when the store cannot defer a write's sync
	clock    *storeClock
	opts     Options

	mu      sync.Mutex
	cursors map[string]*cursor // per queue name: this process's position
	lastMS  int64              // the last push's time and its sequence in it
	seq     uint32

	poppers atomic.Int64 // Pops running in this process
	spread  atomic.Int32 // entries to choose among, after claims lost to other processes (1 to maxSpread)
	metrics struct {
		pops, empty, scans, visited, conflicts, deadLettered atomic.Uint64
	}
}

// New returns a Queue on store, which must have a clock (storage.Clock).
func New(store storage.Store, opts Options) (*Queue, error) {
	store = userstore.Raw(store) // a DB's Store(): the queues' family is this package's
	c, ok := store.(storage.Clock)
	if !ok {
		return nil, ErrNoClock
	}
	switch {
	case opts.MaxDeliveries < 0:
		return nil, fmt.Errorf("%w: MaxDeliveries %d", ErrInvalidArgument, opts.MaxDeliveries)
	case opts.Drift < 0 || opts.Drift >= 0.5:
		return nil, fmt.Errorf("%w: Drift %v (0 to 0.5)", ErrInvalidArgument, opts.Drift)
	case opts.Grace < 0 || opts.CatchUp < 0 || opts.Retention < 0 || opts.MaxBackOff < 0:
		return nil, fmt.Errorf("%w: negative duration", ErrInvalidArgument)
	}
	if opts.MaxDeliveries == 0 {
		opts.MaxDeliveries = 5
	}
	if opts.Drift == 0 {
		opts.Drift = 0.01
	}
	if opts.Grace == 0 {
		opts.Grace = 2 * time.Second
	}
	if opts.CatchUp == 0 {
		opts.CatchUp = time.Second
	}
	if opts.Retention == 0 {
		opts.Retention = time.Minute
	}
	if opts.MaxBackOff == 0 {
		opts.MaxBackOff = 100 * time.Millisecond
	}
	q := &Queue{store: store, opts: opts, cursors: map[string]*cursor{},
		clock: &storeClock{clock: c, drift: opts.Drift, refresh: opts.Grace / 4}}
	q.counted, _ = store.(storage.Counted)
	q.deferred, _ = store.(storage.Deferred)
	q.spread.Store(1)
	return q, nil
}

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

// Keys. A queue's rows share the prefix "queue/NAME\x00" (names hold no
// NUL); then "i"+ID for items, "v"+at+ID+req for index entries (at: 16
// hex digits of store milliseconds, so entries sort by the time their
// item becomes available, then by item), "d"+ID for dead letters and "c"
// for the shared cursor. An ID is 16 hex digits of the push's store time
// and 16 random ones.
func prefix(name string) string { return "queue/" + name + "\x00" }

func itemRow(name, id string) []byte { return []byte(prefix(name) + "i" + id) }
func deadRow(name, id string) []byte { return []byte(prefix(name) + "d" + id) }
func cursorRow(name string) []byte   { return []byte(prefix(name) + "c") }

func entryKey(at int64, id string, req uint64) string {
	return fmt.Sprintf("%016x%s%016x", uint64(at), id, req)
}

func entryRow(name, key string) []byte { return []byte(prefix(name) + "v" + key) }

const idLen = 32

// entry is an index entry as scanned.
type entry struct {
	key   string // after the "v"
	at    int64
	id    string
	req   uint64
	epoch uint64
}

func parseEntry(name string, r storage.Row) (entry, bool) {
	k := string(r.Key)
	p := prefix(name) + "v"
	if !strings.HasPrefix(k, p) || len(k) != len(p)+16+idLen+16 || len(r.Cells) == 0 || len(r.Cells[0].Value) != 8 {
		return entry{}, false
	}
	k = k[len(p):]
	at, err1 := hex.DecodeString(k[:16])
	req, err2 := hex.DecodeString(k[16+idLen:])
	if err1 != nil || err2 != nil {
		return entry{}, false
	}
	return entry{key: k, at: int64(binary.BigEndian.Uint64(at)), id: k[16 : 16+idLen], req: binary.BigEndian.Uint64(req),
		epoch: binary.BigEndian.Uint64(r.Cells[0].Value)}, true
}

// newID returns a new item's ID and its push time: the store time ms, or
// the last ID's if that is later, so that one process's pushes sort in
// the order it made them.
func (q *Queue) newID(ms int64) (string, int64) {
	q.mu.Lock()
	if ms <= q.lastMS {
		ms, q.seq = q.lastMS, q.seq+1
	} else {
		q.lastMS, q.seq = ms, 0
	}
	seq := q.seq
	q.mu.Unlock()
	return fmt.Sprintf("%016x%08x%08x", uint64(ms), seq, rand.Uint32()), ms
}

// CheckName reports whether name can name a queue: 1 to MaxNameSize
// bytes, no NUL (ErrInvalidArgument otherwise).
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameSize || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: queue name %q is empty, longer than %d bytes or holds a NUL", ErrInvalidArgument, name, MaxNameSize)
	}
	return nil
}

func checkID(id string) error {
	if len(id) != idLen {
		return fmt.Errorf("%w: item id %q", ErrInvalidArgument, id)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return fmt.Errorf("%w: item id %q", ErrInvalidArgument, id)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: lease TTL %v (at least 1ms)", ErrInvalidArgument, ttl)
	}
	return nil
}

// PushedAt returns the store time an item was pushed, from its ID.
func PushedAt(id string) time.Time {
	b, err := hex.DecodeString(id[:min(16, len(id))])
	if err != nil || len(b) != 8 {
		return time.Time{}
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b)))
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
