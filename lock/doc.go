// Package lock is a mutual-exclusion lock on a named row of a
// storage.Store: leases, fencing tokens and FIFO tickets, on the store's
// compare-and-set and its clock (storage.Clock), so it runs on every
// backend with a clock (embedded, the single server, Bigtable).
//
// It answers the open problems of the bakery sketch (seeds/002):
//
//  1. A client that crashes while choosing or holding blocks everyone:
//     here a ticket and a holder cell each carry an expiry by the store's
//     clock. A waiter renews its ticket while it waits; one that dies
//     stops, its ticket expires and stops counting (the next grant
//     deletes it). A holder that dies leaves a lease that expires; the
//     next waiter is granted the lock with a larger token.
//  2. Idle workers contend and rescan: a waiter reads one row (the lock's
//     holder, counters and tickets), backs off with jitter while the
//     lock is held, and only the lowest live ticket tries the grant.
//  3. Leases, not locks: a holder may act only until its acquire-send
//     time + TTL × (1 − ρ) by its own monotonic clock (Lease.Valid), and
//     every grant carries a fencing token that strictly increases, so a
//     protected resource can refuse a holder that stalled past its lease.
//
// # Invariants
//
//  1. One row per lock ("lock/NAME", family "mutex", apart from the
//     transactions' "lock" family): the token counter
//     (its version is the last token granted; never deleted, so a release
//     does not reset it), the holder cell at its token's version (holder,
//     lease id, expiry), the ticket counter, and the waiters' tickets.
//  2. A grant is one CheckAndMutate that applies only if neither the token
//     counter nor the holder cell changed since the row was read: at most
//     one grant per token, and tokens strictly increase.
//  3. Expiry is stamped and judged in one clock, the store's: a holder's
//     expiry is the store's time when it asked + TTL, rounded up to the
//     store's millisecond, and a waiter takes the lock only when the
//     store's time has passed it. A holder stops by its own monotonic
//     clock at its send time + TTL × (1 − ρ), earlier than the store's
//     expiry as long as its clock runs at most ρ slower than the store's
//     (Options.Drift, default 1%). Client wall clocks are never used, so a
//     client whose wall clock runs fast cannot break mutual exclusion;
//     the store's clock may jump (NTP) only by less than TTL × ρ.
//  4. Every call is safe to re-send after an unknown outcome: a grant or a
//     ticket carries the request's random id, and a waiter that finds its
//     id in the holder cell (or a ticket) knows its earlier call applied.
//     Renew and Release apply only to the holder cell at the lease's
//     token.
//  5. Waiters are served in ticket order among live tickets (the bakery's
//     fairness); a cancelled waiter withdraws its ticket.
//
// Why not the bakery over quorum reads and writes: the bakery needs only
// reads and writes, but every waiter reads every other's cells and one
// that stops while choosing stops everyone. With a single-row
// compare-and-set (every backend here) a grant is one conditional write,
// and leases with tokens make a dead or stalled holder harmless. The
// work queue built the same way is package queue.
package lock
