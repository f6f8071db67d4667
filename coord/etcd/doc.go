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
//
// # The elected timestamp oracle (election.go, mark.go, oracle.go)
//
// In the distributed deployment several `percolator oracle` processes run
// a Candidate each; the one etcd elects hands out timestamps, the others
// stand by. DESIGN.md's protocol invariant 1 (timestamps strictly
// increasing, across failovers) rests on these:
//
//  1. A candidate campaigns with concurrency.Election, its value the
//     address clients dial, on a lease it renews itself: KeepAliveOnce
//     every TTL/3, recording the monotonic send time of each. It allocates
//     only while its monotonic clock reads less than its deadline: the
//     send time of its last acknowledged renewal (or of the grant) + the
//     granted TTL − a drift margin (default TTL/10). The check runs under
//     the Allocator's mutex at every allocation (oracle.Mark.Usable), so
//     a window of timestamps held in memory is worth nothing past it.
//  2. etcd expires the lease no earlier than a TTL after it received the
//     last renewal, which it did after that renewal was sent; a standby's
//     key wins only once the leader's key is gone, with its lease. So the
//     leader's deadline passes before a successor can win: at most one
//     candidate allocates at any moment, paused (SIGSTOP, a long GC) or
//     not.
//  3. The high-water mark lives in etcd at <prefix>oracle/mark, 8 bytes
//     big-endian (etcd compares values bytewise, so that is numeric), with
//     no lease. Every timestamp a leader hands out is below a mark already
//     durable there (written a Window ahead, in the background, as the
//     file allocator does). Every mark write is an etcd Txn conditioned on
//     the leader key's create revision (Election.Rev()) and on the stored
//     mark being below the new value: a stale leader cannot write, and the
//     mark never goes down.
//  4. A new leader reads the mark after it has won and resumes at it, so
//     it hands out only timestamps above every one any earlier leader
//     handed out (3), and only after them in real time (2).
//  5. A term ends when its deadline passes without a renewal, when etcd
//     says the lease is gone, when a mark write is refused by the revision
//     condition, or on Close. The candidate then closes the term's
//     allocator (nothing more is handed out) before it revokes the lease
//     (deleting its key, so a standby can win at once), and campaigns
//     again on a fresh lease, with a fresh allocator from the mark then
//     current if it wins. A term never resumes: a leader paused past its
//     deadline allocates nothing after it resumes until it wins an
//     election again.
//  6. A candidate that does not lead, or whose deadline has passed,
//     answers oracle.ErrNotLeader (the oracle role's gRPC server turns it
//     into codes.Unavailable). Clients (OracleBackend) find the leader as
//     the value of the election's first-created key (what
//     Election.Leader returns) and, on Unavailable or a failed connection,
//     resolve it again within a budget (default 10s). oracle.Client still
//     rejects a reply that is not above the previous one; by 4 a new
//     leader's replies never are.
//  7. OracleBackend is an oracle.VersionedBackend that reports, reply by
//     reply, whether the answering oracle read the observer registry
//     version: an oracle role given the store (server.OracleOptions.Store,
//     `percolator oracle --bigtable`) reads it after allocating and sends
//     it, and the committer uses it as its registry re-read
//     (txn.VersionedOracle); one without a store sends none, and the
//     committer re-reads the registry itself. Candidates may differ (a
//     rolling restart): a version is only ever taken from the reply that
//     carried it, so a leader without a store never lets a committer skip
//     its re-read. The store an oracle reads must be its clients' store.
//  8. The mark has a copy in the deployment's store (CandidateOptions.Store:
//     a reserved row, oracle.WriteMirror), written before the etcd mark by
//     every mark write, so both are durable before a timestamp below them
//     is handed out; a new term resumes at the larger of the two (etcdMark
//     read). Restoring etcd from an older backup (its documented disaster
//     recovery) rewinds the etcd mark, never the store's copy, so a leader
//     after it resumes above every timestamp handed out.
//  9. A leader's authority also needs its election key: each renewal, sent
//     before it reads the key, moves the deadline only if the key still
//     stands at the term's revision, and a watch on the key ends the term
//     as soon as etcd reports it deleted. A key deleted while its lease
//     lives (an operator, a restored etcd) thus ends the term within one
//     renewal period, and the old leader's deadline, measured from a
//     renewal sent before the deletion, ends within its TTL of it. Every
//     term records its lease and TTL (<prefix>oracle/term) before its first
//     timestamp; a new leader that finds the previous term's lease still
//     alive waits out that TTL before it hands out anything. (A previous
//     lease that has ended needs no wait: its leader resigned after
//     closing its allocator, or etcd expired it after its deadline, 2.)
//
// The caller's contract:
//
//  1. StartCandidate with the address clients dial (not a wildcard such as
//     0.0.0.0) and the deployment's store (8), on an etcd client the
//     caller owns and closes after Close.
//  2. Serve the Candidate, an oracle.Backend, with server.NewOracleServer
//     (the Oracle service, health and Ping), given the deployment's store
//     so that its replies carry the observer registry version (7); the
//     store must be the one its clients write.
//  3. Close it to resign: it stops allocating, then revokes its lease, so
//     a standby takes over at once rather than after the lease.
//  4. Clients wrap NewOracleBackend in one oracle.Client per process.
//
// Rejected design: fencing only the mark writes in etcd. A leader serves
// from a window of timestamps held in memory, so a leader paused past its
// lease would resume and hand a committer a commit_ts from that window,
// below a start_ts the new leader has meanwhile given a reader: the
// deadline check of 1, at each allocation, is what stops it. Rejected
// design: concurrency.Session's own keep-alive. Its renewals are
// invisible to the caller, so no send time can be recorded; the session
// here is built on a lease this package renews (newSession).
//
// Not covered: CLOCK_MONOTONIC, Go's monotonic clock, stops while the
// machine is suspended, so a leader whose whole machine is suspended past
// its lease resumes believing less time has passed; the margin covers
// clock rate differences of up to a tenth of the TTL, not a suspend. And
// a lease revoked by an operator (etcdctl lease revoke) while its leader
// is cut off from etcd: the key goes with the lease, a standby finds no
// live lease to wait out (9) and leads at once, while the cut-off leader
// hands out timestamps until its deadline. A leader that reaches etcd
// learns of the revocation from its watch within milliseconds.
package etcd
