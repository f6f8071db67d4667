package lock

import (
	"context"
	"fmt"
	"time"
)

// Release gives the lock up, if l is still its current grant (releasing
// twice, or after expiry and a new grant, is ErrNotHeld and changes
// nothing). It writes the holder cell's next version, marked released,
// so that a renewal or grant sent before it cannot apply after it. The
// token counter stays: the next grant's token is higher. A call whose
// reply is lost is sent again and recognises its own earlier success.
func (lk *Locker) Release(ctx context.Context, l *Lease) error {
	if l == nil || l.ID == 0 {
		return fmt.Errorf("%w: no lease", ErrInvalidArgument)
	}
	if _, err := lk.change(ctx, l, func(cur holder, _ int64) (holder, error) {
		cur.Released = true
		return cur, nil
	}); err != nil {
		return err
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
	return &Lease{Name: name, Holder: lk.opts.Holder, Token: token, ID: id, ttl: ttl, local: lk.local}, nil
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
	now, s, err := lk.look(ctx, name)
	if err != nil {
		return Status{}, err
	}
	st := Status{Name: name, Token: s.token, Now: time.UnixMilli(now)}
	if h := s.holder; h != nil {
		st.Holder, st.Expiry, st.Held = h.Holder, time.UnixMilli(h.ExpiryMS), !h.Released && h.ExpiryMS > now
	}
	for _, t := range s.tickets {
		if t.t.ExpiryMS > now {
			st.Waiters = append(st.Waiters, t.t.Holder)
		}
	}
	return st, nil
}
