// Package etcd is the coordination service on etcd, for the distributed
// deployment (Cloud Bigtable as the store): the paper's Chubby.
//
// Session is a process's liveness session: an etcd lease this package
// renews itself, the owner's liveness key under it, advisory scan locks
// (coord.Locker) and group memberships (which workers are up, for
// splitting the notification keyspace). It is the process's
// coord.Liveness, and its Check is txn's Options.Session. The semantics
// are coord/remote's, over etcd instead of the percolator server.
//
// StartEmbedded runs a single etcd member in the process, for tests and
// `percolator devcluster`.
//
// The elected timestamp oracle, which also campaigns and keeps its mark
// in etcd, is oracle/etcd, above this package: it renews a lease of its
// own, and nothing here imports an oracle package.
//
// # Why the lease is the liveness
//
// A lock's owner may be judged dead, and its transaction rolled back, only
// if it can no longer commit. etcd decides a lease's expiry in one place
// (its leader) and deletes every key attached to the lease in the same
// step, so every reader agrees on the moment an owner died, and a process
// that stops renewing (killed, paused, cut off) loses its liveness key
// without doing anything. The process, for its part, counts its lease
// shorter than etcd does (invariant 3), so it has stopped committing
// before anyone can see it dead.
//
// # Keys
//
// Every key is under SessionOptions.Prefix (default "percolator/"; it ends
// in "/"), so several databases can share one etcd:
//
//	<prefix>live/<owner>              ""      the owner is alive
//	<prefix>lock/<key>                owner   an advisory lock
//	<prefix>members/<group>/<owner>   value   a membership
//
// A group contains no "/", so the keys of one group never lie under
// another's prefix; owners may contain "/" (coord.NewOwnerID does).
//
// # Invariants
//
//  1. A Session writes only under its prefix, and only keys attached to
//     one of its leases: nothing it writes outlives its lease.
//  2. An owner is alive exactly while <prefix>live/<owner> exists. It is
//     put when a lease is granted and goes with the lease: when the
//     process closes the session (the lease is revoked: seen dead at
//     once), or about TTL after its last renewal (etcd expires the lease).
//     Alive reads linearizably: a serializable read from a lagging member
//     could miss a key just put and report a live owner dead. An error
//     means "unknown", which callers treat as alive.
//  3. Check() is nil only while, by this process's monotonic clock, now <
//     sent + TTL − TTL/10, where sent is the time recorded before sending
//     the last renewal (KeepAliveOnce) or grant that etcd acknowledged, and
//     TTL is the TTL etcd granted. etcd starts counting the lease when it
//     receives the request, after sent, so while Check passes the
//     liveness key exists; the tenth covers the two clocks' rate drift. A
//     process paused past its lease (SIGSTOP, a long GC) fails Check when
//     it resumes, before it can send a commit; txn checks it just before
//     its commit point. Renewals go every TTL/3 (every TTL/10 while they
//     fail).
//  4. A lease becomes current only after the liveness key and every
//     membership the process registered are put under it. A lease found
//     gone (a renewal, lock or registration answered "lease not found")
//     makes Check fail at once; a new lease is granted and the keys put
//     again for the same owner, and only then does Check pass. In the gap
//     the owner was dead, and its locks may have been rolled back: its
//     commits then fail at the primary's CheckAndMutate, never half-apply.
//     (coord.Local's "dead stays dead" does not hold here, as with
//     coord/remote.)
//  5. An advisory lock is the key <prefix>lock/<key>, created under the
//     lease only if absent (a Txn on CreateRevision == 0), so at most one
//     session holds it. Unlock deletes it only if its create revision is
//     still the one this session created, so releasing a lock lost with a
//     lease never releases the lock another took since. Locks go with the
//     lease (they are advisory: a lost one costs a duplicate, aborted
//     observer run). In front, a process-local coord.LocalLocker keeps two
//     scanners of one process from sharing one etcd lock. So a lock key
//     under the session's own lease that a TryLock finds while it holds
//     the local lock has no holder: an attempt whose reply was lost left
//     it (etcd applied the create; the caller saw an error), or an unlock
//     not yet through. TryLock deletes it (if unchanged) and creates the
//     key anew; left alone, the session's renewals would keep it, and the
//     row from every other scanner, for the life of the process.
//  6. Members lists a group's members sorted by owner. WatchMembers
//     delivers the list read by a Get, then follows a Watch from the
//     revision after that Get's, so no change falls between the two; on
//     any watch error (compaction, no leader) it reads the group again and
//     watches from there. A list equal to the last one delivered is not
//     sent again (a re-put after a new lease changes nothing).
//
// # Rejected designs
//
// concurrency.Session (and clientv3's KeepAlive channel under it) renews
// in the client's shared keepalive loop: it does not report when each
// acknowledged renewal was sent, so no Check could be proved from it, and
// it ends for good when its lease expires, where a worker must come back
// under the same owner with its keys put again. Session renews with
// KeepAliveOnce and keeps the send times itself.
package etcd
