package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/internal/userstore"
	"github.com/seed-992972ee/percolator/storage"
)

// Errors. Bad input wraps ErrInvalidArgument and changes nothing.
var (
	ErrInvalidArgument = errors.New("lock: invalid argument")
	// ErrNotHeld: the lease is not the lock's current one (it expired and
	// another holder got the lock, or it was released).
	ErrNotHeld = errors.New("lock: lease not held")
	// ErrNoClock: the store has no clock of its own (storage.Clock).
	ErrNoClock = errors.New("lock: the store has no clock (storage.Clock)")
)

// Family holds every cell of the locks.
const Family = "mutex"

// Cells of a lock's row.
const (
	qualToken  = "t"  // the token counter: value and version are the last token granted; never deleted
	qualHolder = "h"  // the holder, at the version of its token
	qualTicket = "k"  // the ticket counter, as the token's
	ticketPref = "q/" // a waiter's ticket: q/<20-digit ticket>
)

// MaxNameSize bounds a lock's name.
const MaxNameSize = 1024

// Options configures a Locker.
type Options struct {
	// Holder names this process in the locks it holds; "" means a random
	// one.
	Holder string
	// Drift is ρ, the relative drift of this process's monotonic clock
	// against the store's that a lease tolerates: a holder stops acting at
	// its acquire-send time + TTL × (1 − Drift). 0 means 0.01.
	Drift float64
	// MaxBackOff bounds a waiter's back-off between looks; 0 means 50ms.
	MaxBackOff time.Duration
}

// Locker hands out leases on named locks kept in a store. Safe for
// concurrent use; any number of Lockers, in any processes, share a store.
type Locker struct {
	store storage.Store
	clock storage.Clock
	opts  Options
}

// New returns a Locker on store, which must have a clock (storage.Clock).
func New(store storage.Store, opts Options) (*Locker, error) {
	store = userstore.Raw(store) // a DB's Store(): the locks' family is this package's
	c, ok := store.(storage.Clock)
	if !ok {
		return nil, ErrNoClock
	}
	if opts.Holder == "" {
		opts.Holder = fmt.Sprintf("holder-%016x", rand.Uint64())
	}
	if opts.Drift <= 0 {
		opts.Drift = 0.01
	}
	if opts.Drift >= 0.5 {
		return nil, fmt.Errorf("%w: drift %v (below 0.5)", ErrInvalidArgument, opts.Drift)
	}
	if opts.MaxBackOff <= 0 {
		opts.MaxBackOff = 50 * time.Millisecond
	}
	return &Locker{store: store, clock: c, opts: opts}, nil
}

// Lease is a holder's right to a lock until Expiry (by the store's
// clock). Token strictly increases with every grant of the lock: a
// protected resource refuses a token below one it has seen.
type Lease struct {
	Name   string
	Holder string
	Token  uint64
	Expiry time.Time // by the store's clock
	// ID identifies the grant (its holder cell); with Name and Token it
	// lets another process release it (Locker.Lease).
	ID uint64
	// until is when this process must stop acting (its monotonic clock):
	// the request's send time + TTL × (1 − Drift).
	until time.Time
	ttl   time.Duration
}

// Valid reports whether the holder may still act under the lease, by its
// own monotonic clock.
func (l *Lease) Valid() bool { return time.Now().Before(l.until) }

// Deadline is when the holder must stop acting, by its own monotonic
// clock (Valid is time.Now().Before(Deadline())): a driver bounds a
// renewal by it and stops its work there, whether or not the renewal has
// answered. Renew moves it; do not call it concurrently with Renew.
func (l *Lease) Deadline() time.Time { return l.until }

// TTL is the lease's length, as asked.
func (l *Lease) TTL() time.Duration { return l.ttl }

// holder is the holder cell's value.
type holder struct {
	Holder   string `json:"holder"`
	ID       uint64 `json:"id"`
	ExpiryMS int64  `json:"expiry_ms"` // store clock
}

// ticket is a waiter's ticket cell's value.
type ticket struct {
	Holder   string `json:"holder"`
	ID       uint64 `json:"id"`
	ExpiryMS int64  `json:"expiry_ms"` // store clock: a waiter that died stops counting
}

func row(name string) []byte { return []byte("lock/" + name) }

func checkName(name string) error {
	if name == "" || len(name) > MaxNameSize {
		return fmt.Errorf("%w: lock name %q is empty or longer than %d bytes", ErrInvalidArgument, name, MaxNameSize)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: TTL %v (at least 1ms)", ErrInvalidArgument, ttl)
	}
	return nil
}

func ticketQual(n uint64) string { return ticketPref + fmt.Sprintf("%020d", n) }

// state is a lock's row as read.
type state struct {
	token, tokenTS uint64 // last token granted (0: none)
	holder         *holder
	holderTS       uint64
	ticketN        uint64 // last ticket taken
	tickets        []ticketAt
}

type ticketAt struct {
	n uint64
	t ticket
}

func (lk *Locker) read(ctx context.Context, name string) (state, error) {
	r, err := lk.store.ReadRow(ctx, row(name), storage.Filter{{Family: Family, AllQualifiers: true, Limit: 1}})
	if err != nil {
		return state{}, err
	}
	var s state
	for _, c := range r.Cells {
		switch {
		case c.Qualifier == qualToken:
			s.token, s.tokenTS = c.TS, c.TS
		case c.Qualifier == qualTicket:
			s.ticketN = c.TS
		case c.Qualifier == qualHolder:
			var h holder
			if json.Unmarshal(c.Value, &h) != nil {
				return state{}, fmt.Errorf("lock %s: corrupt holder cell", name)
			}
			s.holder, s.holderTS = &h, c.TS
		case strings.HasPrefix(c.Qualifier, ticketPref):
			n, err := strconv.ParseUint(c.Qualifier[len(ticketPref):], 10, 64)
			var t ticket
			if err != nil || json.Unmarshal(c.Value, &t) != nil {
				return state{}, fmt.Errorf("lock %s: corrupt ticket %q", name, c.Qualifier)
			}
			s.tickets = append(s.tickets, ticketAt{n, t})
		}
	}
	return s, nil
}

func (lk *Locker) now(ctx context.Context) (int64, error) {
	t, err := lk.clock.Now(ctx)
	return t.UnixMilli(), err
}
