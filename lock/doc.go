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
//  3. Leases, not locks: a holder may act only until the first send of
//     the call that stamped its lease's expiry + TTL × (1 − ρ) by its own
//     monotonic clock (Lease.Valid), and every grant carries a fencing
//     token that strictly increases, so a protected resource can refuse a
//     holder that stalled past its lease.
//
// # Invariants
//
//  1. One row per lock ("lock/NAME", family "mutex", apart from the
//     transactions' "lock" family): the token counter
//     (its version is the last token granted; never deleted, so a release
//     does not reset it), the holder cell (holder, grant id, token,
//     expiry, the request that wrote it, released), the ticket counter,
//     and the waiters' tickets (a ticket's version counts its renewals).
//  2. Every change of the holder cell (grant, renewal, release) writes
//     its next version by a CheckAndMutate that applies only if no
//     version above the one read exists; the cell is never deleted, so
//     its versions only grow. A grant also applies only if the token
//     counter and the tickets it deletes as expired have no newer version
//     than read. So a grant, a renewal and a release that read the same
//     version race for one write: a renewal that lands between a waiter's
//     read (which judged the lease expired) and its grant makes the grant
//     fail, and a grant or release that lands first makes the renewal
//     fail. At most one grant per token; tokens strictly increase.
//  3. Expiry is stamped and judged in one clock, the store's: a holder's
//     expiry is the store's time when it asked + TTL, rounded up to the
//     store's millisecond, and a waiter takes the lock only when the
//     store's time (read before the row) has passed it. A renewal reads
//     the store's time too, and refuses (ErrNotHeld) a lease whose expiry
//     has passed; one that lands after the expiry it read was still ahead
//     changed the cell's version first, so no grant that read the old
//     version applies. Client wall clocks are never used, so a client
//     whose wall clock runs fast cannot break mutual exclusion; the
//     store's clock may jump (NTP) only by less than TTL × ρ.
//  4. A holder stops by its own monotonic clock at S + TTL × (1 − ρ),
//     where S is the first send of the call that stamped the store's
//     expiry (DESIGN protocol invariant 10): the grant found applied, or
//     the renewal. S precedes that call's reading of the store's clock,
//     so the holder stops before the store's expiry as long as its clock
//     runs at most ρ slower than the store's (Options.Drift, default 1%).
//     A grant or renewal whose reply was lost and which is found applied
//     by a later read keeps the S of its own send, not the later one's:
//     Acquire remembers each grant it sent with its send time, and a
//     renewal's content is fixed at its first send. A grant whose reply
//     came back later than TTL returns a lease already over.
//  5. Every call is safe to re-send after an unknown outcome, and a late
//     copy of it (a slow network; there are no nonces on Bigtable or in
//     process) changes nothing: a ticket is taken by CAS on the ticket
//     counter being below its number; a grant, renewal or release by
//     CAS on versions (2), and each carries its request's id, so a
//     re-sent one recognises its own earlier success; a ticket's renewal
//     is conditioned on the version it read (a copy landing after a
//     grant deleted the ticket does not bring it back); a withdrawal
//     deletes a ticket number no one else ever holds. An Acquire that
//     gives up (its context ended, or the store kept failing) releases a
//     grant of its own that it finds applied unseen.
//  6. Waiters are served in ticket order among live tickets (the bakery's
//     fairness); a cancelled waiter withdraws its ticket. A ticket lives
//     Options.TicketTTL (2s), whatever the lease's TTL: a waiter renews
//     it at half its life and never sleeps longer than a quarter of it
//     (MaxBackOff is capped so), so a live waiter keeps its place for any
//     TTL, as long as each of its looks takes under a quarter of
//     TicketTTL (a waiter slower than that cannot be told from a dead
//     one). A dead waiter holds up those behind it for at most TicketTTL.
//     Rejected: a ticket living as long as the lease's TTL, renewed at
//     half of it between back-offs of up to MaxBackOff; with a TTL under
//     about twice MaxBackOff a live waiter's ticket expired while it
//     slept and a later ticket was served first.
//
// testdata/leases walks a lock through each of these, one look at a
// time: renewals, ticket order, a dead and a cancelled waiter, expiry
// and fencing, a grant whose reply was lost.
//
// Why not the bakery over quorum reads and writes: the bakery needs only
// reads and writes, but every waiter reads every other's cells and one
// that stops while choosing stops everyone. With a single-row
// compare-and-set (every backend here) a grant is one conditional write,
// and leases with tokens make a dead or stalled holder harmless. The
// work queue built the same way is package queue.
package lock
