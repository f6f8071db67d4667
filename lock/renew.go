package lock

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// Renew extends the lease by its TTL from now (the store's clock), if it
// is still the lock's current grant and has not expired by the store's
// clock (a renewal never brings back an expired lease: ErrNotHeld). Its
// holder may then act until the renewal's first send + TTL × (1 − Drift),
// however late its reply comes or however often it is sent again. On an
// error other than ErrNotHeld the deadline stays where it was, whether or
// not the renewal applied.
func (lk *Locker) Renew(ctx context.Context, l *Lease) error {
	if l == nil || l.ID == 0 {
		return fmt.Errorf("%w: no lease", ErrInvalidArgument)
	}
	sent := lk.local()
	var expiryMS int64 // the renewal's content, fixed at its first send
	h, err := lk.change(ctx, l, func(cur holder, now int64) (holder, error) {
		if cur.ExpiryMS <= now {
			return holder{}, fmt.Errorf("%w: %s token %d expired", ErrNotHeld, l.Name, l.Token)
		}
		if expiryMS == 0 {
			expiryMS = expiry(now, l.ttl)
		}
		cur.ExpiryMS = expiryMS
		return cur, nil
	})
	if err != nil {
		return err
	}
	l.Expiry, l.until = time.UnixMilli(h.ExpiryMS), lk.deadline(sent, l.ttl)
	return nil
}

// change writes the next version of the holder cell, rewrite's version
// of the current one, if the cell is still l's grant (else ErrNotHeld).
// The write is conditioned on no version above the one read, so that it
// applies at most once however often it is sent, a late copy changes
// nothing, and a grant that read the row before it fails; every grant,
// renewal and release writes a newer version, so nothing it read can
// change unseen. A write whose outcome is unknown is looked for by its
// request id and sent again if absent, up to 8 failures in a row.
func (lk *Locker) change(ctx context.Context, l *Lease, rewrite func(cur holder, now int64) (holder, error)) (holder, error) {
	req := rand.Uint64() | 1
	var h holder
	err := retry(ctx, nil, func() (next, error) {
		var nx next
		var err error
		h, nx, err = lk.changeOnce(ctx, l, req, rewrite)
		return nx, err
	})
	return h, err
}

// changeOnce is one round of change (request req): look, and write the
// holder cell's next version by CAS on the version read.
func (lk *Locker) changeOnce(ctx context.Context, l *Lease, req uint64, rewrite func(cur holder, now int64) (holder, error)) (holder, next, error) {
	now, s, err := lk.look(ctx, l.Name)
	if err != nil {
		return holder{}, again, err
	}
	cur := s.holder
	if cur != nil && cur.Req == req && cur.ID == l.ID {
		return *cur, stop, nil // an earlier send applied; its reply was lost
	}
	if !cur.owns(l) {
		return holder{}, stop, fmt.Errorf("%w: %s token %d", ErrNotHeld, l.Name, l.Token)
	}
	h, err := rewrite(*cur, now)
	if err != nil {
		return holder{}, stop, err
	}
	h.Req = req
	b, _ := json.Marshal(h)
	v := s.holderTS + 1
	refused, err := lk.store.CheckAndMutate(ctx, row(l.Name),
		storage.Filter{{Family: Family, Qualifier: qualHolder, Time: storage.From(v), Limit: 1}}, nil,
		[]storage.Mutation{
			storage.SetCell(Family, qualHolder, v, b),
			{Kind: storage.DeleteCells, Family: Family, Qualifier: qualHolder, Time: storage.Before(v)},
		})
	switch {
	case err != nil:
		return holder{}, again, err
	case refused: // the predicate matched: the cell moved on since read, nothing written
		return holder{}, again, nil
	}
	return h, stop, nil
}
