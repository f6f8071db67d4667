// Package etcd is the elected timestamp oracle of the distributed
// deployment (Cloud Bigtable as the store, etcd as the coordination
// service): several `percolator oracle` processes run a Candidate each;
// the one etcd elects hands out timestamps, the others stand by. Clients
// find the leader through etcd and allocate from it over gRPC
// (OracleBackend, over oracle/remote).
//
//   - election.go: Candidate, its campaign, its terms and the lease it
//     renews itself;
//   - mark.go: the high-water mark in etcd, and its copy in the store
//     (oracle.WriteMirror);
//   - backend.go: OracleBackend and LeaderAddr, the clients' side.
//
// The process's liveness session, advisory locks and memberships are
// coord/etcd's; this package shares no lease with them.
//
// # Keys
//
// Every key is under CandidateOptions.Prefix (default
// DefaultOraclePrefix, "percolator/", the root coord/etcd's sessions use
// too):
//
//	<prefix>oracle/leader/<lease>   addr     the election (concurrency.Election)
//	<prefix>oracle/mark             8 bytes  the high-water mark, no lease
//	<prefix>oracle/term             JSON     the last term's revision, lease and TTL
//
// # Invariants
//
// DESIGN.md's protocol invariant 1 (timestamps strictly increasing,
// across failovers) rests on these:
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
//     version: an oracle role given the store and the registry's reader
//     (server.OracleOptions Store and RegistryVersion, `percolator oracle
//     --bigtable`) reads it after allocating and sends it, and the
//     committer uses it as its registry re-read (txn.VersionedOracle);
//     one without sends none, and the committer re-reads the registry
//     itself. Candidates may differ (a rolling restart): a version is only
//     ever taken from the reply that carried it, so a leader without a
//     store never lets a committer skip its re-read. The store an oracle
//     reads must be its clients' store.
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
// # The caller's contract
//
//  1. StartCandidate with the address clients dial (not a wildcard such as
//     0.0.0.0) and the deployment's store (8), on an etcd client the
//     caller owns and closes after Close.
//  2. Serve the Candidate, an oracle.Backend, with server.NewOracleServer
//     (the Oracle service, health and Ping), given the deployment's store
//     and observer.StoredVersion (OracleOptions Store and
//     RegistryVersion) so that its replies carry the observer registry
//     version (7); the store must be the one its clients write.
//  3. Close it to resign: it stops allocating, then revokes its lease, so
//     a standby takes over at once rather than after the lease.
//  4. Clients wrap NewOracleBackend in one oracle.Client per process.
//
// # Rejected designs
//
// Fencing only the mark writes in etcd. A leader serves from a window of
// timestamps held in memory, so a leader paused past its lease would
// resume and hand a committer a commit_ts from that window, below a
// start_ts the new leader has meanwhile given a reader: the deadline
// check of 1, at each allocation, is what stops it.
//
// concurrency.Session's own keep-alive. Its renewals are invisible to the
// caller, so no send time can be recorded; the session here is built on
// a lease this package renews (newSession).
//
// Campaigning on the process's coord/etcd Session. A Session that finds
// its lease gone grants another and carries on under the same owner, and
// its Close ends the process's liveness; a term must end for good with
// its lease (5), and a resignation must revoke the election key's lease
// and nothing else. So each term has a lease of its own.
//
// # Not covered
//
// CLOCK_MONOTONIC, Go's monotonic clock, stops while the machine is
// suspended, so a leader whose whole machine is suspended past its lease
// resumes believing less time has passed; the margin covers clock rate
// differences of up to a tenth of the TTL, not a suspend. And a lease
// revoked by an operator (etcdctl lease revoke) while its leader is cut
// off from etcd: the key goes with the lease, a standby finds no live
// lease to wait out (9) and leads at once, while the cut-off leader hands
// out timestamps until its deadline. A leader that reaches etcd learns of
// the revocation from its watch within milliseconds.
package etcd
