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
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	w := &waiter{lk: lk, name: name, ttl: ttl, id: rand.Uint64() | 1, grants: map[uint64]time.Time{}}
	l, err := w.wait(ctx)
	if err != nil {
		w.withdraw(ctx)
		return nil, err
	}
	return l, nil
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

// wait loops: look at the lock; while it is held, or a lower live ticket
// waits, keep the ticket and back off; when this waiter is first and the
// lock free, send a grant.
func (w *waiter) wait(ctx context.Context) (*Lease, error) {
	lk := w.lk
	fails := 0
	pause := false
	for attempt := 0; ; attempt++ {
		if pause {
			if err := lk.backoff(ctx, attempt); err != nil {
				return nil, err
			}
		}
		pause = true
		if w.my == 0 {
			if err := w.takeTicket(ctx); err != nil {
				return nil, err
			}
		}
		sent := time.Now()
		now, s, err := lk.look(ctx, w.name)
		if err != nil {
			if fails++; fails >= attempts || !transient(ctx, err) {
				return nil, err
			}
			continue
		}
		fails = 0
		if h := s.holder; h != nil {
			if at, ok := w.grants[h.ID]; ok && !h.Released {
				return lk.lease(w.name, h, at, w.ttl, w.my), nil // a grant whose reply was lost
			}
			if !h.Released && h.ExpiryMS > now {
				w.keepTicket(ctx, s, now)
				continue // held: wait
			}
		}
		if !w.first(s, now) {
			w.keepTicket(ctx, s, now)
			continue
		}
		l, known := w.grant(ctx, s, now, sent)
		if l != nil {
			return l, nil
		}
		// Refused (the row changed since read: look again after a pause),
		// or outcome unknown (look again at once).
		pause = known
	}
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
		until: lk.deadline(sent, ttl), ttl: ttl, ticket: ticket}
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
