package view

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/lock"
)

// LockState prints lock name's state (lock.Locker.Show): its holder,
// token and time left by the store's clock, or that it is free; then
// its waiters.
func LockState(w io.Writer, name string, st lock.Status) {
	switch {
	case st.Token == 0:
		fmt.Fprintf(w, "%s: never granted\n", name)
	case st.Held:
		fmt.Fprintf(w, "%s: held by %s, token %d, for %s more (store clock)\n", name, st.Holder, st.Token, st.Expiry.Sub(st.Now).Round(time.Millisecond))
	default:
		fmt.Fprintf(w, "%s: free (last token %d)\n", name, st.Token)
	}
	if len(st.Waiters) > 0 {
		fmt.Fprintf(w, "waiters, in ticket order: %s\n", strings.Join(st.Waiters, " "))
	}
}

// lockStateJSON is a lock's state as `lock show --json` prints it.
type lockStateJSON struct {
	Name       string   `json:"name"`
	Held       bool     `json:"held"`
	Holder     string   `json:"holder,omitempty"`
	Token      uint64   `json:"token"`
	Expiry     string   `json:"expiry,omitempty"`
	RemainingS float64  `json:"remaining_s,omitempty"`
	Now        string   `json:"now"`
	Waiters    []string `json:"waiters"`
}

// LockStateJSON prints lock name's state as JSON: as LockState, with the
// holder and expiry of the last grant (absent if none) and the time left
// (only while held).
func LockStateJSON(w io.Writer, name string, st lock.Status) error {
	j := lockStateJSON{Name: name, Held: st.Held, Holder: st.Holder, Token: st.Token, Expiry: Time(st.Expiry), Now: Time(st.Now), Waiters: st.Waiters}
	if st.Held {
		j.RemainingS = Seconds(st.Expiry.Sub(st.Now))
	}
	if j.Waiters == nil {
		j.Waiters = []string{}
	}
	return JSON(w, j)
}

// Lease prints a lease lock acquire granted: its token, id and expiry
// (by the store's clock), which lock release takes; as text or JSON.
func Lease(w io.Writer, l *lock.Lease, jsonOut bool) error {
	if jsonOut {
		return JSON(w, struct {
			Name   string `json:"name"`
			Holder string `json:"holder"`
			Token  uint64 `json:"token"`
			ID     uint64 `json:"id"`
			Expiry string `json:"expiry"`
		}{l.Name, l.Holder, l.Token, l.ID, Time(l.Expiry)})
	}
	_, err := fmt.Fprintf(w, "acquired %s token %d id %d expires %s (store clock)\n", l.Name, l.Token, l.ID, l.Expiry.UTC().Format(time.RFC3339Nano))
	return err
}
