package queue

import (
	"encoding/hex"
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

// Queue is a set of named work queues kept in a store. Safe for
// concurrent use; any number of Queues, in any processes, share a store.
type Queue struct {
	store    storage.Store
	counted  storage.Counted  // nil when the store cannot count
	deferred storage.Deferred // nil when the store cannot defer a write's sync
	clock    *storeClock
	opts     Options
	// jitter draws a random duration in [0, n): rand.N (a test draws
	// its own), so that processes take their turns at the shared cursor
	// at different times.
	jitter func(n time.Duration) time.Duration

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
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.ensureDefaults()
	q := &Queue{store: store, opts: opts, cursors: map[string]*cursor{}, jitter: rand.N[time.Duration],
		clock: &storeClock{clock: c, drift: opts.Drift, refresh: opts.Grace / 4, local: time.Now}}
	q.counted, _ = store.(storage.Counted)
	q.deferred, _ = store.(storage.Deferred)
	q.spread.Store(1)
	return q, nil
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
