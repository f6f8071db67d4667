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
