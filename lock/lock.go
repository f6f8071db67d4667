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
	// A waiter never sleeps longer than a quarter of TicketTTL.
	MaxBackOff time.Duration
	// TicketTTL is how long a waiter's ticket lives unless renewed, by
	// the store's clock, whatever the lease's TTL: a waiter renews it
	// when half of it is gone, and one that died stops holding up the
	// waiters behind it after at most this long. A live waiter keeps its
	// place as long as each of its looks (a clock reading, a row read, a
	// renewal) takes less than a quarter of it. 0 means 2s; at least
	// 10ms.
	TicketTTL time.Duration
}

// minTicketTTL bounds Options.TicketTTL from below: a waiter renews its
// ticket at half its life, between sleeps of up to a quarter of it.
const minTicketTTL = 10 * time.Millisecond

// Locker hands out leases on named locks kept in a store. Safe for
// concurrent use; any number of Lockers, in any processes, share a store.
type Locker struct {
	store storage.Store
	clock storage.Clock
	opts  Options
	// local is this process's monotonic clock, which deadlines are
	// measured by: time.Now (a test drives its own).
	local func() time.Time
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
	switch {
	case opts.TicketTTL == 0:
		opts.TicketTTL = 2 * time.Second
	case opts.TicketTTL < minTicketTTL:
		return nil, fmt.Errorf("%w: TicketTTL %v (at least %v: a waiter renews its ticket at half its life)", ErrInvalidArgument, opts.TicketTTL, minTicketTTL)
	}
	return &Locker{store: store, clock: c, opts: opts, local: time.Now}, nil
}

// Lease is a holder's right to a lock until Expiry (by the store's
// clock). Token strictly increases with every grant of the lock: a
// protected resource refuses a token below one it has seen.
type Lease struct {
	Name   string
	Holder string
	Token  uint64
	Expiry time.Time // by the store's clock
	// ID identifies the grant; with Name and Token it lets another
	// process release it (Locker.Lease).
	ID uint64
	// until is when this process must stop acting (its monotonic clock):
	// the first send of the call that set the store's expiry (the grant,
	// or the last renewal) + TTL × (1 − Drift).
	until time.Time
	ttl   time.Duration
	// ticket is the waiter's ticket the grant served (0: none known).
	ticket uint64
	// local is the monotonic clock of the Locker that made the lease (nil:
	// time.Now).
	local func() time.Time
}

// Valid reports whether the holder may still act under the lease, by its
// own monotonic clock.
func (l *Lease) Valid() bool {
	now := time.Now
	if l.local != nil {
		now = l.local
	}
	return now().Before(l.until)
}

// Deadline is when the holder must stop acting, by its own monotonic
// clock (Valid is time.Now().Before(Deadline())): a driver bounds a
// renewal by it and stops its work there, whether or not the renewal has
// answered. Renew moves it; do not call it concurrently with Renew.
func (l *Lease) Deadline() time.Time { return l.until }

// TTL is the lease's length, as asked.
func (l *Lease) TTL() time.Duration { return l.ttl }

// holder is the holder cell's value. Every change of the cell (a grant, a
// renewal, a release) writes it at the next version, so that a version
// names one content and a conditional write on "no version above the one
// I read" sees every change since.
type holder struct {
	Holder   string `json:"holder"`
	ID       uint64 `json:"id"`        // the grant
	Token    uint64 `json:"token"`     // the grant's token (0 in cells written before the versions moved on renewal: the version is the token there)
	ExpiryMS int64  `json:"expiry_ms"` // store clock
	Req      uint64 `json:"req"`       // the call that wrote this version: a re-sent call recognises its own success
	Released bool   `json:"released,omitempty"`
}

// owns reports whether h is lease l's grant, still in force (not
// released; it may have expired).
func (h *holder) owns(l *Lease) bool {
	return h != nil && !h.Released && h.ID == l.ID && h.Token == l.Token
}

// ticket is a waiter's ticket cell's value; its version counts the
// ticket's renewals.
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
	n  uint64
	ts uint64 // its version
	t  ticket
}

// ticketOf returns waiter my's ticket in s, or nil.
func (s *state) ticketOf(my uint64) *ticketAt {
	for i := range s.tickets {
		if s.tickets[i].n == my {
			return &s.tickets[i]
		}
	}
	return nil
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
			if h.Token == 0 {
				h.Token = c.TS
			}
			s.holder, s.holderTS = &h, c.TS
		case strings.HasPrefix(c.Qualifier, ticketPref):
			n, err := strconv.ParseUint(c.Qualifier[len(ticketPref):], 10, 64)
			var t ticket
			if err != nil || json.Unmarshal(c.Value, &t) != nil {
				return state{}, fmt.Errorf("lock %s: corrupt ticket %q", name, c.Qualifier)
			}
			s.tickets = append(s.tickets, ticketAt{n, c.TS, t})
		}
	}
	return s, nil
}

func (lk *Locker) now(ctx context.Context) (int64, error) {
	t, err := lk.clock.Now(ctx)
	return t.UnixMilli(), err
}

// look reads the store's clock, then the lock's row: the row is read
// after the time, so an expiry that time passed really has passed.
func (lk *Locker) look(ctx context.Context, name string) (int64, state, error) {
	now, err := lk.now(ctx)
	if err != nil {
		return 0, state{}, err
	}
	s, err := lk.read(ctx, name)
	return now, s, err
}

// attempts bounds the store calls in a row that fail before a call gives
// up and returns the last error.
const attempts = 8

// next is what a round of a retried call asks for.
type next int

const (
	stop   next = iota // the call is over: its error (nil: success) is final
	again              // another round, after the pause
	atOnce             // another round, without the pause
)

// retry runs round until it asks to stop, and is the one loop of every
// call that is sent again: Acquire's looks, a ticket's taking, a holder
// cell's change, a ticket's withdrawal. A round that returns an error
// without stopping failed: the loop gives up on the attempts-th failure
// in a row, or at once when the error is not transient, returning it. A
// round that did not fail (refused: the row moved on since read; or
// still waiting) clears the count. Before every round but the first, and
// unless the round before asked for atOnce, pause (nil: none) sleeps; n
// counts the rounds from 0.
func retry(ctx context.Context, pause func(n int) error, round func() (next, error)) error {
	fails := 0
	quick := true
	for n := 0; ; n++ {
		if !quick && pause != nil {
			if err := pause(n); err != nil {
				return err
			}
		}
		nx, err := round()
		switch {
		case nx == stop:
			return err
		case err != nil:
			if fails++; fails >= attempts || !transient(ctx, err) {
				return err
			}
		default:
			fails = 0
		}
		quick = nx == atOnce
	}
}

// transient reports whether a store call that failed with err may
// succeed if sent again: not for bad input, a closed store or an ended
// context.
func transient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, storage.ErrInvalidArgument) && !errors.Is(err, storage.ErrClosed)
}
