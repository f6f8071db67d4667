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
	// Grace is L, the longest a state change may take from the clock
	// reading its index entry's time came from to its reply before the
	// writer moves the item to a fresh entry; the shared cursor stays
	// twice Grace behind the store's time. 0 means 2s.
	Grace time.Duration
	// CatchUp is how often the shared cursor is advanced (by one
	// process at a time); entries written late are delivered within
	// Grace + CatchUp. 0 means 1s.
	CatchUp time.Duration
	// Retention is how long an acked item's mark stays (a re-sent Ack or
	// Push finds it there); 0 means 1 minute.
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
)

// state is an item's state cell. Every change writes it at the next
// version (its epoch) by CheckAndMutate on the current one, so a version
// names one content: a call conditioned on the epoch it read is
// conditioned on all of it.
type state struct {
	St    string `json:"st"`
	Lease uint64 `json:"lease,omitempty"` // the current (leased) or last lease
	At    int64  `json:"at,omitempty"`    // ms: the time of the state's index entry (ready: visible; leased: expiry; acked: removal)
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

func epochValue(e uint64) []byte { return binary.BigEndian.AppendUint64(nil, e) }

// writeEntry writes the index entry of an item's next state.
// It brings this process's cursor back to it if it lies behind: a
// process finds its own entries at once.
// A lazy write may return before it is durable, on a store whose writes
// share one ordered log (storage.Deferred): the caller's next durable
// write covers it.
func (q *Queue) writeEntry(ctx context.Context, name, id string, next *state, epoch uint64, lazy bool) error {
	key := entryKey(next.At, id, next.Req)
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

// transition moves item id from its state at epoch to next (at epoch+1):
// the next state's index entry is written first (so that every state
// but dead has its entry: a crash leaves at most an entry too many), then
// the state by CheckAndMutate on epoch, then the old entry (oldKey) goes.
// extra are more mutations of the item row. A call whose outcome is
// unknown is sent again, and recognised by next.Req in the state. It
// reports whether the transition applied.
func (q *Queue) transition(ctx context.Context, name, id string, epoch uint64, next state, oldKey string, extra ...storage.Mutation) (bool, error) {
	if next.St != stDead {
		// Lazy: the state's durable write below covers it.
		if err := q.retry(ctx, func() error { return q.writeEntry(ctx, name, id, &next, epoch+1, true) }); err != nil {
			return false, err
		}
	}
	b, _ := json.Marshal(next)
	muts := append([]storage.Mutation{
		storage.SetCell(Family, qualState, epoch+1, b),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualState, Time: storage.Before(epoch + 1)},
	}, extra...)
	pred := storage.Filter{{Family: Family, Qualifier: qualState, Time: storage.At(epoch), Limit: 1}}
	var applied bool
	var lastErr error
	for attempt := 0; attempt < attempts; attempt++ {
		matched, err := q.store.CheckAndMutate(ctx, itemRow(name, id), pred, muts, nil)
		if err == nil {
			applied = matched
			lastErr = nil
			break
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		// Unknown outcome: the state tells.
		it, rerr := q.readItem(ctx, name, id, false)
		if rerr != nil {
			continue
		}
		if it.epoch == epoch+1 && it.st.Req == next.Req {
			applied, lastErr = true, nil
			break
		}
		if it.epoch != epoch {
			lastErr = nil
			break // changed by another: not applied
		}
	}
	if lastErr != nil {
		return false, lastErr
	}
	if !applied {
		if next.St != stDead { // our entry names a state that never was
			_ = q.deleteEntry(ctx, name, entryKey(next.At, id, next.Req))
		}
		return false, nil
	}
	if oldKey != "" {
		_ = q.deleteEntry(ctx, name, oldKey) // a leftover is stale and found so
	}
	return true, nil
}

// Push adds an item with body to queue name, ordered by the store's time
// of the push, and returns its ID. A push whose reply was lost is sent
// again with the same ID and is found, not doubled.
func (q *Queue) Push(ctx context.Context, name string, body []byte) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	if len(body) > MaxBodySize {
		return "", fmt.Errorf("%w: body of %d bytes exceeds %d", ErrInvalidArgument, len(body), MaxBodySize)
	}
	l0 := time.Now()
	lo, _, err := q.clock.bounds(ctx)
	if err != nil {
		return "", err
	}
	id, at := q.newID(lo)
	st := state{St: stReady, At: at, Req: newReq()}
	b, _ := json.Marshal(st)
	row := itemRow(name, id)
	// The item first, then its entry: an entry always finds its item.
	// Written only if absent, so a re-send after the item was popped
	// (and its mark kept for Retention) changes nothing.
	// The item's write may be lazy: the entry's durable write covers it.
	cam := q.store.CheckAndMutate
	if q.deferred != nil {
		cam = q.deferred.CheckAndMutateDeferred
	}
	err = q.retry(ctx, func() error {
		_, err := cam(ctx, row, stateFilter, nil, []storage.Mutation{
			storage.SetCell(Family, qualBody, 0, body),
			storage.SetCell(Family, qualState, 1, b),
		})
		return err
	})
	if err == nil {
		err = q.retry(ctx, func() error { return q.writeEntry(ctx, name, id, &st, 1, false) })
	}
	if err != nil {
		return "", err
	}
	return id, q.settle(ctx, name, id, 1, st, lo, l0)
}

// retry runs an idempotent store call until it succeeds, up to 5 times
// when its outcome is unknown.
func (q *Queue) retry(ctx context.Context, call func() error) error {
	var err error
	for attempt := 0; attempt < attempts; attempt++ {
		if err = call(); err == nil || errors.Is(err, storage.ErrInvalidArgument) || errors.Is(err, storage.ErrClosed) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func newReq() uint64 { return rand.Uint64() | 1 }

// settle makes sure the entry of a state an item has just been given,
// for the store time lo read at local time l0, was not written behind the
// shared cursor (which stays 2 × Grace behind the store's time): when the
// call took longer than its entry's lead over lo + 0.9 Grace, the item
// moves to a fresh entry, until one is in time.
func (q *Queue) settle(ctx context.Context, name, id string, epoch uint64, st state, lo int64, l0 time.Time) error {
	for round := 0; time.Since(l0) >= time.Duration(st.At-lo)*time.Millisecond+q.opts.Grace*9/10; round++ {
		if round == attempts {
			return fmt.Errorf("queue %s: item %s: the store's writes take longer than Grace (%v); raise Options.Grace", name, id, q.opts.Grace)
		}
		l0 = time.Now()
		var err error
		if lo, _, err = q.clock.bounds(ctx); err != nil {
			return err
		}
		next := st
		next.At, next.Req = max(lo, st.At), newReq()
		ok, err := q.transition(ctx, name, id, epoch, next, entryKey(st.At, id, st.Req))
		if err != nil || !ok {
			return err // !ok: moved on meanwhile, so its entry was found
		}
		epoch, st = epoch+1, next
	}
	return nil
}

// attempts bounds the sends of one store call whose outcome stays unknown.
const attempts = 8
