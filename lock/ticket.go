package lock

import (
	"context"
	"encoding/json"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// takeTicket takes the next ticket of the lock by CAS on the ticket
// counter, writing the waiter's ticket in the same row write. The call
// applies only while the counter is below its number, so a late copy
// changes nothing once the counter moved on (at least by the copy
// itself); a call whose outcome is unknown is found by the waiter's id in
// the next read.
func (w *waiter) takeTicket(ctx context.Context) error {
	return retry(ctx, func(n int) error { return w.lk.backoff(ctx, min(n, 3)) }, func() (next, error) {
		return w.ticketOnce(ctx)
	})
}

// ticketOnce is one round of takeTicket: look, and take the number after
// the counter's by CAS, unless a ticket with the waiter's id is there.
func (w *waiter) ticketOnce(ctx context.Context) (next, error) {
	now, s, err := w.lk.look(ctx, w.name)
	if err != nil {
		return again, err
	}
	for _, t := range s.tickets {
		if t.t.ID == w.id {
			w.my = t.n
			return stop, nil
		}
	}
	n := s.ticketN + 1
	refused, err := w.lk.store.CheckAndMutate(ctx, row(w.name),
		storage.Filter{{Family: Family, Qualifier: qualTicket, Time: storage.From(n), Limit: 1}}, nil,
		[]storage.Mutation{
			storage.SetCell(Family, qualTicket, n, nil),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualTicket, Time: storage.Before(n)},
			storage.SetCell(Family, ticketQual(n), 1, w.ticket(now)),
		})
	switch {
	case err != nil:
		return again, err
	case refused: // the predicate matched: another waiter took n first
		return again, nil
	}
	w.my = n
	return stop, nil
}

// ticket is the waiter's ticket cell, live for TicketTTL from now.
func (w *waiter) ticket(now int64) []byte {
	b, _ := json.Marshal(ticket{Holder: w.lk.opts.Holder, ID: w.id, ExpiryMS: now + w.lk.opts.TicketTTL.Milliseconds()})
	return b
}

// keepTicket renews the waiter's ticket when half its life is gone (a
// waiter renews while it waits; one that dies stops, and its ticket
// expires). The renewal writes the ticket's next version, conditioned on
// the version read: a late copy of it, or one landing after a grant
// deleted the ticket as expired, changes nothing. Its outcome is left to
// the next look. A ticket deleted as expired is taken anew at the next
// look, behind the others.
func (w *waiter) keepTicket(ctx context.Context, s state, now int64) {
	t := s.ticketOf(w.my)
	if t == nil {
		w.my = 0
		return
	}
	if t.t.ExpiryMS-now > w.lk.opts.TicketTTL.Milliseconds()/2 {
		return
	}
	q := ticketQual(w.my)
	_, _ = w.lk.store.CheckAndMutate(ctx, row(w.name),
		storage.Filter{{Family: Family, Qualifier: q, Time: storage.At(t.ts), Limit: 1}},
		[]storage.Mutation{
			storage.SetCell(Family, q, t.ts+1, w.ticket(now)),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: q, Time: storage.Before(t.ts + 1)},
		}, nil)
}

// withdraw deletes the waiter's ticket, and any other with its id (a
// ticket taken by a call whose outcome stayed unknown), even if ctx has
// ended; and releases a grant of its that applied unseen. The number is
// this waiter's alone (the counter never goes back), so a late copy of
// the deletion only deletes what this waiter took: safe to send again.
func (w *waiter) withdraw(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	mine := map[uint64]bool{}
	if w.my != 0 {
		mine[w.my] = true
	}
	if s, err := w.lk.read(ctx, w.name); err == nil {
		for _, t := range s.tickets {
			if t.t.ID == w.id {
				mine[t.n] = true
			}
		}
		if h := s.holder; h != nil && !h.Released {
			if _, ok := w.grants[h.ID]; ok {
				_ = w.lk.Release(ctx, w.lk.lease(w.name, h, time.Time{}, w.ttl, 0))
			}
		}
	}
	for n := range mine {
		_ = retry(ctx, nil, func() (next, error) {
			err := w.lk.store.Mutate(ctx, row(w.name), storage.Mutation{Kind: storage.DeleteCells, Family: Family, Qualifier: ticketQual(n)})
			if err != nil {
				return again, err
			}
			return stop, nil
		})
	}
}
