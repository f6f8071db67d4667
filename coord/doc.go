// Package coord is the coordination service the protocol consults: who is
// alive, advisory row locks for scanners (Locker), and the live members
// of a group (Membership, with which observer workers split the notify
// keyspace). The timestamp oracle's leader election is not here: it is
// the oracle's own (oracle/etcd), on a lease of its own.
//
// # Liveness
//
// Every process that writes locks has an owner identity, unique per
// process run. A lock names its owner. A reader that finds a lock asks
// Liveness whether the owner is alive: if not, the lock's transaction may be
// rolled back at once instead of waiting out the lock's TTL (the paper's
// Chubby liveness check).
//
// Invariants of Local, the in-process implementation for the embedded
// store:
//
//  1. An owner is alive exactly while it is registered in this process.
//  2. The embedded store is opened by one process at a time (the store's
//     directory lock) and by one client in it (the store's one apply hook),
//     so an owner not registered here belongs to a process that has
//     exited: it is dead, and stays dead (identities are never reused: they
//     embed random bytes).
//  3. Local is right only for a store that one client owns. A store shared
//     with other processes needs a Liveness that knows every process (a
//     server's sessions, etcd leases); without one, TTLOnly treats every
//     owner as alive, and a lock is judged by its TTL alone.
//
// # Membership
//
// A Membership handle registers its owner in named groups under the
// owner's liveness, and watches a group's full member list:
//
//  1. A member leaves its group when the ctx it registered with ends, or
//     when its owner dies (etcd: its session's lease lapses); a dead
//     owner cannot register again (ErrNotAlive).
//  2. A watch delivers the whole list, sorted by Owner, at its start and
//     after every change; a reader that falls behind gets the newest list,
//     never a queue of stale ones. Two watchers of one group see the same
//     lists in the same order, each possibly skipping some.
//  3. Membership is advice to the observers, as Locker is: a member list
//     may lag the truth (a dead member still listed until its lease ends,
//     a watcher that has not caught up), and nothing that needs to be
//     correct rests on it.
//
// LocalMembership is the in-process implementation (tests): handles made
// with As share one set of groups; Remove simulates a death.
//
// # Sessions with a lease
//
// The sessions of coord/remote (a percolator server's) and coord/etcd
// renew their lease with one loop, Renewal: every third of the lease, a
// tenth while renewals fail, one warning per outage. What a renewal sends,
// and what a lease found gone becomes, stay each session's own.
package coord
