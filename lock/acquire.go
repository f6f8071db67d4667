package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// Acquire waits for the lock name and returns a lease of ttl on it, with
// a token above every earlier grant's. Waiters are served in the order of
// their tickets (the bakery's idea), except that a ticket whose waiter
// died (stopped renewing it) expires and stops counting. Cancelling ctx
// withdraws the waiter's ticket.
func (lk *Locker) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	id := rand.Uint64() | 1
	my, err := lk.takeTicket(ctx, name, id, ttl)
	if err != nil {
		return nil, err
	}
	withdraw := func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = lk.store.Mutate(wctx, row(name), storage.DeleteCell(Family, ticketQual(my), 0))
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := lk.backoff(ctx, attempt); err != nil {
				withdraw()
				return nil, err
			}
		}
		sent := time.Now()
		now, err := lk.now(ctx)
		if err != nil {
			withdraw()
			return nil, err
		}
		s, err := lk.read(ctx, name)
		if err != nil {
			withdraw()
			return nil, err
		}
		if s.holder != nil && s.holder.ID == id {
			// Our grant's reply was lost: we hold it.
			return lk.lease(name, s.holderTS, s.holder, sent, ttl), nil
		}
		if s.holder != nil && s.holder.ExpiryMS > now {
			if my, err = lk.keepTicket(ctx, name, s, my, id, now, ttl); err != nil {
				return nil, err
			}
			continue // held: wait
		}
		// Free (or its lease expired): the lowest live ticket is served.
		first := uint64(0)
		for _, t := range s.tickets {
			if t.t.ExpiryMS > now || t.n == my {
				first = t.n
				break
			}
		}
		if first != my {
			if my, err = lk.keepTicket(ctx, name, s, my, id, now, ttl); err != nil {
				return nil, err
			}
			continue
		}
		h := holder{Holder: lk.opts.Holder, ID: id, ExpiryMS: expiry(now, ttl)}
		token := s.token + 1
		b, _ := json.Marshal(h)
		muts := []storage.Mutation{
			storage.SetCell(Family, qualToken, token, nil),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualToken, Time: storage.Before(token)},
			storage.SetCell(Family, qualHolder, token, b),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualHolder, Time: storage.Before(token)},
			storage.DeleteCell(Family, ticketQual(my), 0),
		}
		for _, t := range s.tickets { // dead waiters' tickets go
			if t.n != my && t.t.ExpiryMS <= now {
				muts = append(muts, storage.DeleteCell(Family, ticketQual(t.n), 0))
			}
		}
		// Granted only if neither the token nor the holder changed since
		// read (every change writes a newer version of one of them).
		pred := storage.Filter{
			{Family: Family, Qualifier: qualToken, Time: storage.From(s.tokenTS + 1), Limit: 1},
			{Family: Family, Qualifier: qualHolder, Time: storage.From(s.holderTS + 1), Limit: 1},
		}
		changed, err := lk.store.CheckAndMutate(ctx, row(name), pred, nil, muts)
		if err != nil {
			continue // unknown outcome: the next read tells
		}
		if !changed {
			return lk.lease(name, token, &h, sent, ttl), nil
		}
	}
}

// expiry is a lease's end by the store's clock: now (in whole
// milliseconds, rounded down) + ttl, plus the millisecond the rounding may
// have taken, so that the store never judges a lease over before its
// holder, whose clock is not rounded, stops acting.
func expiry(nowMS int64, ttl time.Duration) int64 {
	return nowMS + (ttl + time.Millisecond - 1).Milliseconds() + 1
}

func (lk *Locker) lease(name string, token uint64, h *holder, sent time.Time, ttl time.Duration) *Lease {
	return &Lease{Name: name, Holder: h.Holder, Token: token, Expiry: time.UnixMilli(h.ExpiryMS), ID: h.ID,
		until: sent.Add(time.Duration(float64(ttl) * (1 - lk.opts.Drift))), ttl: ttl}
}

// takeTicket takes the next ticket of name by CAS on the ticket counter,
// writing the waiter's ticket in the same row write; a lost reply is
// found by its id.
func (lk *Locker) takeTicket(ctx context.Context, name string, id uint64, ttl time.Duration) (uint64, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := lk.backoff(ctx, min(attempt, 3)); err != nil {
				return 0, err
			}
		}
		now, err := lk.now(ctx)
		if err != nil {
			return 0, err
		}
		s, err := lk.read(ctx, name)
		if err != nil {
			return 0, err
		}
		for _, t := range s.tickets {
			if t.t.ID == id {
				return t.n, nil
			}
		}
		n := s.ticketN + 1
		b, _ := json.Marshal(ticket{Holder: lk.opts.Holder, ID: id, ExpiryMS: now + ttl.Milliseconds()})
		changed, err := lk.store.CheckAndMutate(ctx, row(name),
			storage.Filter{{Family: Family, Qualifier: qualTicket, Time: storage.From(n), Limit: 1}}, nil,
			[]storage.Mutation{
				storage.SetCell(Family, qualTicket, n, nil),
				{Kind: storage.DeleteCells, Family: Family, Qualifier: qualTicket, Time: storage.Before(n)},
				storage.SetCell(Family, ticketQual(n), 0, b),
			})
		if err == nil && !changed {
			return n, nil
		}
	}
}

// keepTicket renews the waiter's ticket when half its life is gone (a
// waiter renews while it waits; one that dies stops, and its ticket
// expires). A ticket another waiter deleted as expired is taken anew,
// behind the others.
func (lk *Locker) keepTicket(ctx context.Context, name string, s state, my, id uint64, now int64, ttl time.Duration) (uint64, error) {
	for _, t := range s.tickets {
		if t.n == my {
			if t.t.ExpiryMS-now > ttl.Milliseconds()/2 {
				return my, nil
			}
			b, _ := json.Marshal(ticket{Holder: lk.opts.Holder, ID: id, ExpiryMS: now + ttl.Milliseconds()})
			return my, lk.store.Mutate(ctx, row(name), storage.SetCell(Family, ticketQual(my), 0, b))
		}
	}
	return lk.takeTicket(ctx, name, id, ttl) // deleted as expired: queue again
}

func (lk *Locker) backoff(ctx context.Context, attempt int) error {
	d := lk.opts.MaxBackOff >> max(0, 5-attempt)
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d)) + int64(time.Millisecond)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Renew extends the lease by its TTL from now (the store's clock), if it
// is still the lock's current one; its holder may act until the renewal's
// send time + TTL × (1 − Drift).
func (lk *Locker) Renew(ctx context.Context, l *Lease) error {
	if l == nil || l.ID == 0 {
		return fmt.Errorf("%w: no lease", ErrInvalidArgument)
	}
	sent := time.Now()
	now, err := lk.now(ctx)
	if err != nil {
		return err
	}
	h := holder{Holder: l.Holder, ID: l.ID, ExpiryMS: expiry(now, l.ttl)}
	b, _ := json.Marshal(h)
	for attempt := 0; ; attempt++ {
		if _, err := lk.current(ctx, l); err != nil {
			return err
		}
		matched, err := lk.store.CheckAndMutate(ctx, row(l.Name),
			storage.Filter{{Family: Family, Qualifier: qualHolder, Time: storage.At(l.Token), Limit: 1}},
			[]storage.Mutation{storage.SetCell(Family, qualHolder, l.Token, b)}, nil)
		if err != nil {
			if attempt < 4 {
				continue // re-sent: the same cell, the same value
			}
			return err
		}
		if !matched {
			return fmt.Errorf("%w: %s token %d", ErrNotHeld, l.Name, l.Token)
		}
		break
	}
	l.Expiry, l.until = time.UnixMilli(h.ExpiryMS), sent.Add(time.Duration(float64(l.ttl)*(1-lk.opts.Drift)))
	return nil
}

// current reports whether l is the lock's current lease (its holder cell
// at its token, with its id); ErrNotHeld otherwise.
func (lk *Locker) current(ctx context.Context, l *Lease) (bool, error) {
	s, err := lk.read(ctx, l.Name)
	if err != nil {
		return false, err
	}
	if s.holder == nil || s.holderTS != l.Token || s.holder.ID != l.ID {
		return false, fmt.Errorf("%w: %s token %d", ErrNotHeld, l.Name, l.Token)
	}
	return true, nil
}

// Release gives the lock up, if l is still its current lease (releasing
// twice, or after expiry and a new grant, is ErrNotHeld and changes
// nothing). The token counter stays: the next grant's token is higher. A
// call whose reply is lost is sent again; finding the lease gone then
// means the earlier call released it.
func (lk *Locker) Release(ctx context.Context, l *Lease) error {
	if l == nil || l.ID == 0 {
		return fmt.Errorf("%w: no lease", ErrInvalidArgument)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err := lk.current(ctx, l); err != nil {
			if errors.Is(err, ErrNotHeld) && lastErr != nil {
				break // our earlier call applied
			}
			return err
		}
		matched, err := lk.store.CheckAndMutate(ctx, row(l.Name),
			storage.Filter{{Family: Family, Qualifier: qualHolder, Time: storage.At(l.Token), Limit: 1}},
			[]storage.Mutation{{Kind: storage.DeleteCells, Family: Family, Qualifier: qualHolder, Time: storage.Before(l.Token + 1)}}, nil)
		if err != nil {
			lastErr = err
			continue
		}
		if !matched {
			return fmt.Errorf("%w: %s token %d", ErrNotHeld, l.Name, l.Token)
		}
		break
	}
	l.until = time.Time{}
	return nil
}

// Lease returns the lease (name, token, id) of a grant made elsewhere (a
// command that printed them), to Release or Renew it; its holder acts
// under it only after a Renew.
func (lk *Locker) Lease(name string, token, id uint64, ttl time.Duration) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := checkTTL(ttl); err != nil {
		return nil, err
	}
	if token == 0 || id == 0 {
		return nil, fmt.Errorf("%w: token and id are required", ErrInvalidArgument)
	}
	return &Lease{Name: name, Holder: lk.opts.Holder, Token: token, ID: id, ttl: ttl}, nil
}

// Status is a lock as Show reads it.
type Status struct {
	Name    string
	Held    bool      // a holder's lease has not expired
	Holder  string    // the current or last holder
	Token   uint64    // the last token granted
	Expiry  time.Time // the holder's lease's end, by the store's clock
	Now     time.Time // the store's clock when read
	Waiters []string  // live tickets' holders, in ticket order
}

// Show reads the lock name.
func (lk *Locker) Show(ctx context.Context, name string) (Status, error) {
	if err := checkName(name); err != nil {
		return Status{}, err
	}
	now, err := lk.now(ctx)
	if err != nil {
		return Status{}, err
	}
	s, err := lk.read(ctx, name)
	if err != nil {
		return Status{}, err
	}
	st := Status{Name: name, Token: s.token, Now: time.UnixMilli(now)}
	if s.holder != nil {
		st.Holder, st.Expiry, st.Held = s.holder.Holder, time.UnixMilli(s.holder.ExpiryMS), s.holder.ExpiryMS > now
	}
	for _, t := range s.tickets {
		if t.t.ExpiryMS > now {
			st.Waiters = append(st.Waiters, t.t.Holder)
		}
	}
	return st, nil
}
