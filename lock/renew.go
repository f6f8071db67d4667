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
	sent := time.Now()
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

// change writes the next version of the holder cell, next's rewrite of
// the current one, if the cell is still l's grant (else ErrNotHeld). The
// write is conditioned on no version above the one read, so that it
// applies at most once however often it is sent, a late copy changes
// nothing, and a grant that read the row before it fails; every grant,
// renewal and release writes a newer version, so nothing it read can
// change unseen. A write whose outcome is unknown is looked for by its
// request id and sent again if absent, up to 8 failures in a row.
func (lk *Locker) change(ctx context.Context, l *Lease, next func(cur holder, now int64) (holder, error)) (holder, error) {
	req := rand.Uint64() | 1
	fails := 0
	for {
		now, s, err := lk.look(ctx, l.Name)
		if err == nil {
			cur := s.holder
			if cur != nil && cur.Req == req && cur.ID == l.ID {
				return *cur, nil // an earlier send applied; its reply was lost
			}
			if !cur.owns(l) {
				return holder{}, fmt.Errorf("%w: %s token %d", ErrNotHeld, l.Name, l.Token)
			}
			h, nerr := next(*cur, now)
			if nerr != nil {
				return holder{}, nerr
			}
			h.Req = req
			b, _ := json.Marshal(h)
			v := s.holderTS + 1
			var refused bool // the predicate matched: a newer version, nothing written
			refused, err = lk.store.CheckAndMutate(ctx, row(l.Name),
				storage.Filter{{Family: Family, Qualifier: qualHolder, Time: storage.From(v), Limit: 1}}, nil,
				[]storage.Mutation{
					storage.SetCell(Family, qualHolder, v, b),
					{Kind: storage.DeleteCells, Family: Family, Qualifier: qualHolder, Time: storage.Before(v)},
				})
			if err == nil && !refused {
				return h, nil
			}
			if err == nil {
				fails = 0
				continue // refused: the cell moved on since read; look again
			}
		}
		if fails++; fails >= attempts || !transient(ctx, err) {
			return holder{}, err
		}
	}
}
