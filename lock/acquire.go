package lock

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"

	"github.com/seed-992972ee/percolator/internal/ctxwait"
	"github.com/seed-992972ee/percolator/storage"
)

// Acquire waits for the lock name and returns a lease of ttl on it, with
// a token above every earlier grant's. Waiters are served in the order of
// their tickets (the bakery's idea), except that a ticket whose waiter
// died (stopped renewing it for Options.TicketTTL) expires and stops
// counting; this holds for any ttl. Cancelling ctx withdraws the waiter's
// ticket. A store call that fails is sent again, up to 8 failures in a
// row.
//
// The lease's deadline is measured from the first send of the grant that
// made it: a grant whose reply was lost and that Acquire then found
// applied may return a lease already over (Valid false), which its holder
// must not act under (it may Renew it, if the store's expiry has not
// passed, or Release it).
func (lk *Locker) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	w, err := lk.newWaiter(name, ttl)
	if err != nil {
		return nil, err
	}
	l, err := w.wait(ctx)
	if err != nil {
		w.withdraw(ctx)
		return nil, err
	}
	return l, nil
}

// newWaiter checks an Acquire's arguments and returns its waiter, with no
// ticket yet.
func (lk *Locker) newWaiter(name string, ttl time.Duration) (*waiter, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	return &waiter{lk: lk, name: name, ttl: ttl, id: rand.Uint64() | 1, grants: map[uint64]time.Time{}}, nil
}

// waiter is one Acquire call. Not safe for concurrent use.
type waiter struct {
	lk   *Locker
	name string
	ttl  time.Duration
	id   uint64 // identifies the waiter's ticket
	my   uint64 // its ticket (0: none yet)
	// grants are the grants this call sent, by id, with their send times:
	// one found applied makes the lease, its deadline measured from that
	// send.
	grants map[uint64]time.Time
}

// wait looks at the lock until it is this waiter's (a round each, under
// retry: a pause before every look but the first and but one right after
// a grant whose outcome is unknown).
func (w *waiter) wait(ctx context.Context) (*Lease, error) {
	var l *Lease
	err := retry(ctx, func(n int) error { return w.lk.backoff(ctx, n) }, func() (next, error) {
		var o outcome
		var err error
		l, o, err = w.round(ctx)
		return o.next(), err
	})
	return l, err
}

// outcome is what one look of a waiter came to.
type outcome int

const (
	// granted: its grant applied; the lease.
	granted outcome = iota
	// foundGranted: a grant of its own found applied, its reply lost; the
	// lease, its deadline measured from that grant's send.
	foundGranted
	// whileHeld: the lock is held; the waiter keeps its ticket and waits.
	whileHeld
	// behind: a lower live ticket waits; the waiter keeps its ticket and
	// waits.
	behind
	// grantRefused: its grant was refused, the row having moved on since
	// read; it looks again after a pause.
	grantRefused
	// grantUnknown: its grant's outcome is unknown; it looks again at once
	// (the next look tells).
	grantUnknown
	// lookFailed: the look failed (the error); it looks again.
	lookFailed
	// ticketFailed: taking its ticket failed for good (the error).
	ticketFailed
)

func (o outcome) String() string {
	return [...]string{"granted", "found its grant applied", "held: waits", "behind a lower ticket: waits",
		"grant refused", "grant outcome unknown", "look failed", "no ticket"}[o]
}

// next is what the waiter's loop does after o.
func (o outcome) next() next {
	switch o {
	case granted, foundGranted, ticketFailed:
		return stop
	case grantUnknown:
		return atOnce
	}
	return again
}

// round is one look of the waiter: take a ticket if it has none, read
// the store's clock and the lock's row; a grant of its own found applied
// is the lease; while the lock is held, or a lower live ticket waits, keep
// the ticket; when this waiter is first and the lock free, send a grant.
func (w *waiter) round(ctx context.Context) (*Lease, outcome, error) {
	if w.my == 0 {
		if err := w.takeTicket(ctx); err != nil {
			return nil, ticketFailed, err
		}
	}
	sent := w.lk.local()
	now, s, err := w.lk.look(ctx, w.name)
	if err != nil {
		return nil, lookFailed, err
	}
	if h := s.holder; h != nil {
		if at, ok := w.grants[h.ID]; ok && !h.Released {
			return w.lk.lease(w.name, h, at, w.ttl, w.my), foundGranted, nil
		}
		if !h.Released && h.ExpiryMS > now {
			w.keepTicket(ctx, s, now)
			return nil, whileHeld, nil
		}
	}
	if !w.first(s, now) {
		w.keepTicket(ctx, s, now)
		return nil, behind, nil
	}
	l, known := w.grant(ctx, s, now, sent)
	switch {
	case l != nil:
		return l, granted, nil
	case known:
		return nil, grantRefused, nil
	}
	return nil, grantUnknown, nil
}

// first reports whether this waiter holds the lowest live ticket (its
// own counts while present, even if its renewal is late). A waiter whose
// ticket was deleted as expired takes a new one (keepTicket).
func (w *waiter) first(s state, now int64) bool {
	for _, t := range s.tickets {
		if t.t.ExpiryMS > now || t.n == w.my {
			return t.n == w.my
		}
	}
	return false
}

// grant sends one grant of the next token to this waiter, conditioned on
// nothing having changed since s was read: no newer version of the token
// counter, of the holder cell (every grant, renewal and release writes
// one), nor of a ticket the grant deletes as expired (a renewal that
// landed since keeps it). A late copy of the call finds a newer version
// (at least its own) and changes nothing: safe to send again. It returns
// the lease if the grant applied; known is false when its outcome is
// unknown.
func (w *waiter) grant(ctx context.Context, s state, now int64, sent time.Time) (l *Lease, known bool) {
	gid := rand.Uint64() | 1
	w.grants[gid] = sent
	token := s.token + 1
	v := s.holderTS + 1
	h := holder{Holder: w.lk.opts.Holder, ID: gid, Token: token, ExpiryMS: expiry(now, w.ttl), Req: gid}
	b, _ := json.Marshal(h)
	muts := []storage.Mutation{
		storage.SetCell(Family, qualToken, token, nil),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualToken, Time: storage.Before(token)},
		storage.SetCell(Family, qualHolder, v, b),
		{Kind: storage.DeleteCells, Family: Family, Qualifier: qualHolder, Time: storage.Before(v)},
		{Kind: storage.DeleteCells, Family: Family, Qualifier: ticketQual(w.my)},
	}
	pred := storage.Filter{
		{Family: Family, Qualifier: qualToken, Time: storage.From(s.tokenTS + 1), Limit: 1},
		{Family: Family, Qualifier: qualHolder, Time: storage.From(s.holderTS + 1), Limit: 1},
	}
	for _, t := range s.tickets { // dead waiters' tickets go
		if t.n != w.my && t.t.ExpiryMS <= now {
			muts = append(muts, storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: ticketQual(t.n)})
			pred = append(pred, storage.Selector{Family: Family, Qualifier: ticketQual(t.n), Time: storage.From(t.ts + 1), Limit: 1})
		}
	}
	// The predicate matches (refused: nothing written) when the row moved
	// on since s was read.
	refused, err := w.lk.store.CheckAndMutate(ctx, row(w.name), pred, nil, muts)
	if err != nil {
		return nil, false
	}
	if refused {
		return nil, true
	}
	return w.lk.lease(w.name, &h, sent, w.ttl, w.my), true
}

// expiry is a lease's end by the store's clock: now (in whole
// milliseconds, rounded down) + ttl, plus the millisecond the rounding may
// have taken, so that the store never judges a lease over before its
// holder, whose clock is not rounded, stops acting.
func expiry(nowMS int64, ttl time.Duration) int64 {
	return nowMS + (ttl + time.Millisecond - 1).Milliseconds() + 1
}

// lease is the lease of grant h, whose expiry was stamped by a call first
// sent at sent.
func (lk *Locker) lease(name string, h *holder, sent time.Time, ttl time.Duration, ticket uint64) *Lease {
	return &Lease{Name: name, Holder: h.Holder, Token: h.Token, Expiry: time.UnixMilli(h.ExpiryMS), ID: h.ID,
		until: lk.deadline(sent, ttl), ttl: ttl, ticket: ticket, local: lk.local}
}

// deadline is when a holder whose lease's expiry a call first sent at
// sent stamped must stop acting: sent + ttl × (1 − ρ).
func (lk *Locker) deadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(time.Duration(float64(ttl) * (1 - lk.opts.Drift)))
}

func (lk *Locker) backoff(ctx context.Context, attempt int) error {
	d := max(1, min(lk.opts.MaxBackOff>>max(0, 5-attempt), lk.opts.TicketTTL/4))
	return ctxwait.Sleep(ctx, time.Duration(rand.Int64N(int64(d))+int64(time.Millisecond)))
}
