// Package server is `percolator serve`: one process that owns a database
// directory and serves it to many client processes over gRPC
// (proto/percolator.proto):
//
//   - Storage: the storage model itself (ReadRow, streaming Scan, Mutate,
//     CheckAndMutate, MutateRows, Increment, CompactFamily), not a
//     transaction API, so the one protocol in package txn runs unchanged
//     in every client, on every backend;
//   - Oracle: timestamps (Allocate, and AllocateStream, the stream a
//     client keeps open with one request in flight);
//   - Coord: liveness sessions with a lease, and advisory row locks held
//     by a session;
//   - grpc.health.v1.Health, and Prometheus metrics (percolator_*) on a
//     separate HTTP listener. When the server drains (Shutdown), a health
//     Watch is sent NOT_SERVING and ends (Unavailable): an idle watcher
//     does not hold the drain.
//
// NewOracleServer is the distributed deployment's oracle role
// (`percolator oracle`): the same Oracle service over an elected allocator
// whose mark lives in etcd (oracle/etcd.Candidate), health, and
// Storage.Ping alone (the check rpc.Dial makes); the same token and TLS. A
// candidate that does not lead answers Unavailable, "not the leader".
// Given the deployment's store and the registry's reader
// (OracleOptions.Store and RegistryVersion), its replies carry the
// observer registry version read after allocating, as this server's do
// (Options.RegistryVersion); without them they carry none, and its
// clients re-read the registry themselves.
//
// # Invariants
//
//  1. The server is the store's only writer: it holds the directory's
//     lock, and no client keeps an in-memory index of it (a remote store is
//     not storage.Exclusive).
//  2. Every write the server acknowledges is durable, but one:
//     CheckAndMutateRows, a transaction's prewrites, is answered before
//     its log sync, with the server's epoch. The epoch counts the
//     server's runs (epoch.go): a reserved row raised durably at every
//     start, before serving. CheckAndMutateInEpoch, the commit point that
//     follows (or CommitInEpoch, the same with the commit timestamp
//     taken from this server's oracle under the latches), compares the
//     epoch it carries with the server's under its rows' latches and
//     applies nothing unless they are equal; then every
//     prewrite acknowledged to the client precedes it in the one ordered
//     log and its sync makes them durable (txn/doc.go, "Durability over
//     RPC"). Every other write is a synced Pebble batch (group commit
//     shares the syncs of concurrent calls). SIGKILL or a power cut loses
//     nothing acknowledged but unsynced prewrites, whose transactions the
//     epoch check then refuses to commit.
//  3. A call with a nonce (group, seq) runs at most once, however often it
//     is sent, and every copy gets the first run's result ("Nonces").
//  4. Timestamps only go forward, across restarts and kill -9: the oracle
//     is the store allocator of the embedded DB (its high-water mark and
//     lease live in the store, written ahead of use), so a directory moves
//     between embedded and served use without going back either.
//  5. An owner is alive while it has a live session. Sessions live in
//     memory: after a restart, an owner without one is reported alive for
//     RestartGrace (default: the default lease), or for the longest lease
//     any server of the store granted if that is longer (recorded durably
//     before it is granted): every lease granted before the restart has
//     run out by then, and every live client has opened a new session at
//     its next renewal. An owner whose session ended on this server
//     (expired or closed) is dead at once, grace or not: its session was
//     not lost with a restart.
//  6. An oracle reply carries an observer registry version only if it was
//     read after the reply's allocation, from the store the clients
//     write, by the RegistryVersion the caller gave (observer's
//     StoredVersion: this package does not import observer). A reply
//     without one is always correct: the committer then reads the
//     registry itself (txn.VersionedOracle). `percolator serve` and
//     `percolator oracle` give it; a server built without it costs each
//     commit one read more.
//
// # Nonces
//
// A storage call that is not safe to apply twice in any order
// (Increment; a CheckAndMutate, Mutate or MutateRows of a caller that has
// not declared it idempotent) carries a nonce: the client's nonce group (128 random bits,
// registered durably with OpenNonceGroup when the client starts), the
// call's sequence number in it, and the lowest number whose reply the
// client has not received (its low-water mark). The client resends a call
// with the same nonce until it gets an answer. The server's nonce table:
//
//   - runs a new (group, seq) and records its result (Increment's sum,
//     CheckAndMutate's branch; Mutate and MutateRows, which succeed or
//     fail whole, record none) with a hash of the request in the same
//     atomic Pebble batch as the call's effect (pebble.Record), so a crash
//     keeps both or neither;
//   - answers a duplicate of a call that succeeded from the record, without
//     applying it again; a duplicate of a call still running waits for it;
//     a duplicate of a call that failed runs again (a failed call wrote
//     nothing);
//   - refuses, applying nothing: a number reused with another request body
//     (InvalidArgument), a number below the group's mark, and an unknown
//     group (FailedPrecondition);
//   - drops records below the client's mark (the client will never resend
//     them), persisting the new mark with the deletions, and forgets a
//     group, with its records, NonceGrace (default 30 minutes) after its
//     last call.
//
// The records survive a restart, kill -9 and power cuts included: the
// table is reloaded from the store at open.
//
// Calls that the protocol already makes idempotent under any reordering
// carry no nonce (DESIGN invariant 6: prewrites, commits and rollbacks are
// CheckAndMutates, and secondary commits MutateRows, whose late duplicates
// change nothing; the client sends them through storage.Idempotent and
// storage.IdempotentBatcher), and neither do reads or oracle requests (a
// lost reply only wastes timestamps). That keeps the table to the few
// calls that need it. A MutateRows is not assumed idempotent: puts at
// given timestamps and deletes apply twice harmlessly only in order, and a
// late copy of a batch that deletes a cell would erase a later write of it.
//
// What a nonce costs a MutateRows: the request hashed, a record in its
// batch, and the record's deletion once the client's mark passes it.
// Measured on batches shaped as secondary commits (16 rows) on a 2-core
// machine with the store's disk in memory, so that no sync hides the CPU:
// in process (BenchmarkMutateRowsNonce, alternating the two call by call)
// a call with a nonce took 1.07 to 1.39 times as long (about 70 against
// 55 µs, 18 more allocations); over gRPC with 16 callers
// (storage/remote's BenchmarkSecondaryCommitBatch) about 20% fewer rows
// per second (e.g. 81k against 100k), in runs whose noise reached the
// same size. On a real disk the syncs dominate and the two were within
// noise. The protocol's secondary commits, the bulk of MutateRows
// traffic, declare themselves and pay nothing.
//
// Why sessions, not HBase's nonces by time. HBase's ServerNonceManager
// (HBASE-3787) keys a call by (group, random nonce) and forgets it a fixed
// time after the call ended; a client names no mark. The server then
// cannot tell a late duplicate of a forgotten call from a new call, so a
// retry that arrives after the clean-up is applied a second time, silently;
// its memory grows with the call rate times the retention time; and its
// table lives in memory, rebuilt only partly from the log after a crash.
// Numbered calls in a registered group make each of those exact: the
// client's low-water mark tells the server which records it may drop (so
// the table holds about the calls in flight, not the last half hour of
// them), a number below the mark is refused instead of applied, the group
// is registered durably so the server can tell "never heard of it" from
// "forgotten", and the records are written with the effects, so a restart
// forgets nothing it answered. Time is used only for a client that went
// away without a word: its group is dropped after the grace period, and a
// call in it after that is refused (the client opens a new group, and
// reports an unknown outcome for a call that may have been applied).
//
// # Security and limits
//
// With a token (--token-file or PERCOLATOR_TOKEN) every RPC, the health
// service's too, must carry "authorization: Bearer TOKEN"; the comparison
// hashes both sides and compares the hashes in constant time. A call
// without it or with a wrong one gets Unauthenticated and changes nothing.
// TLS is served with --tls-cert/--tls-key. serve listens on loopback by
// default and refuses any other address without a token, and without TLS
// unless --insecure says the token may cross the network in clear (its
// log then warns so at startup). Messages are
// bounded (MaxMessageSize, default 64 MiB), as are selectors and
// mutations per call; a malformed request gets InvalidArgument naming what
// is wrong, and changes nothing.
//
// # Limits
//
// What one client can hold open on the server is bounded, so that a
// buggy or hostile client (they share the token) cannot exhaust its
// memory or fill its store with nonce records (Options.Max*, serve's
// --max-* flags; negative: no limit). A call past a limit gets
// ResourceExhausted whose message begins "server limit reached" and names
// the limit, the option and the flag that raise it, and what makes room
// (the client's rpc.ErrLimit); it changes nothing, and what is held keeps
// working. A "client" is what the request identifies, since the token is
// shared and a peer's address changes with each reconnection:
//
//   - sessions: per owner (each process opens one, under its own owner
//     ID, and another only when the server forgot the first), default 64,
//     and 10000 in all;
//   - advisory locks: per session (an observer scanner holds one at a
//     time), default 10000, and 100000 in all;
//   - nonce groups: in all only (the request names nothing but the group;
//     each client process opens one per database it opens), default
//     100000; a group is forgotten NonceGrace after its last call;
//   - nonce calls held (those at or above the group's low-water mark):
//     per group, default 100000, and 1000000 in all.
//
// The defaults are far above what the workloads hold (bank with many
// workers: one session and one group per process, no advisory lock; index
// with workers: one session and one group per process, a lock per
// scanner at a time) and bound what a leaking client can take. Sessions
// that expired but were not swept yet are ended before a limit refuses.
//
// # Lifecycle
//
// Shutdown (SIGTERM in serve) stops accepting calls, waits for the calls
// in flight, and closes the oracle (its lease released), the nonce table
// (its pending clean-up written) and the store. A store whose log sync
// failed (storage.ErrFailed) stops the server: a restart recovers exactly
// what reached the disk.
//
// # Metrics
//
// percolator_rpc_requests_total{method,code}, percolator_rpc_duration_seconds{method},
// percolator_oracle_batches_total, percolator_oracle_batch_size,
// percolator_nonce_table_calls, percolator_nonce_table_groups,
// percolator_nonce_replays_total{method}, percolator_sessions,
// percolator_advisory_locks, and percolator_txn_cas_total{kind}: the
// protocol's steps as the server sees them in CheckAndMutates (prewrite,
// conflict, commit — a commit point or a roll-forward —, rollback, and
// lost: a commit or rollback whose lock was already gone; one-phase, a
// one-phase commit; async-prewrite, a row of an async prewrite that
// wrote its locks).
package server
