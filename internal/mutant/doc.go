// Package mutant switches on deliberate protocol bugs, so that the
// checkers of `percolator verify` can be shown to catch real ones.
//
// A mutant is a named break of one protocol invariant of DESIGN.md, made
// on purpose by a hook at the one spot that keeps it:
//
//	if mutant.On(mutant.SkipRollback) { ... }
//
// Only a binary built with -tags percolator_mutants contains them. There
// On reads the environment variable PERCOLATOR_MUTANT (EnvVar) once, at
// init: a comma-separated list of names, which every child process that a
// run starts (server, oracles, clients) inherits. An unknown name ends the
// process at start with the list of the known ones, so that a misspelt
// mutant cannot pass a check by testing nothing. In any other build On is
// a constant false that the compiler inlines, so the hooks cost nothing
// and EnvVar has no effect; Compiled tells the two builds apart.
//
// # The mutants
//
// Each breaks the named invariant; the checker of package history
// expected to flag it follows.
//
//   - skip-lock-check (invariant 2): a transactional read, Get, Scan and
//     CommitTS alike, does not wait on or resolve a lock older than its
//     start_ts: it reads past it, on every store (txn: get.go, with and
//     without the lock index; scan.go). A transaction that commits that
//     lock below the reader's start_ts is then missing from the reader's
//     snapshot. Expected: bank (a read snapshot that sums wrong),
//     list-append (G-single, G1c cycles; lost updates by read-modify-write
//     transactions), register (stale reads).
//   - skip-rollback (invariant 5): rolling a lock back, by its owner's
//     abort or by a resolver that found the owner dead or the lock
//     expired, erases the lock and its data but leaves no rollback record
//     at its start_ts; nor does a resolver fence a primary that holds
//     nothing of the transaction, nor the clear of a notification written
//     ahead of its prewrite fence that prewrite off (txn: resolve.go,
//     rollbackMutations and resolveCell; notifyspace.go, fences). A late
//     or retried prewrite of the transaction then succeeds: it may commit
//     over writes made since, or, where notifications live in rows of
//     their own (Bigtable), commit a change whose notification was
//     cleared; one commit in three holds its prewrite until a worker
//     cleared its first notification (10s at most), which opens that
//     window whatever the machine's speed. Expected: observer
//     on --target distributed ("unprocessed": a worker cleared the
//     notification before its prewrite landed). Elsewhere the protocol
//     masks it: a resolver rolls back only a transaction whose session is
//     gone, a secondary is prewritten only after its primary's lock
//     landed, and the commit point requires the primary's lock, so a late
//     prewrite of a rolled-back transaction cannot commit.
//   - secondaries-first (invariant 4): commit writes the secondaries'
//     commit records before the primary's (txn: commit.go). Until the
//     primary commits a reader sees half the transaction, and a crash in
//     between leaves the secondaries committed while a resolver rolls the
//     primary back. Expected: bank (sums wrong), list-append (G1c,
//     G-single: fractured reads), register under kills.
//   - repeat-timestamp (invariant 1): the oracle client hands the
//     timestamp it handed out before to a caller again, about one call in
//     50 (oracle: client.go). Two transactions share a start_ts and take
//     each other's lock for their own, or a commit_ts equals a later
//     start_ts. Expected: list-append (lost updates, G0), register.
//   - stale-range (invariant 1's batching rule, and so invariant 2): the
//     oracle client fetches a range of timestamps ahead of its callers and
//     serves later callers from it, the design oracle/doc.go rejects
//     (oracle: client.go, NewClient). A committer then gets a commit_ts
//     older than the start_ts of a reader that another process started
//     after the committer's locks, and that reader missed its write. It
//     needs two oracle clients (processes) on one oracle: within one
//     client the range is served in order. Expected: register (stale
//     reads), list-append (G-single, real-time cycles under strong
//     snapshot isolation), bank.
//   - push-secondary (invariant 2, with txn.Options.ReadThroughLocks): a
//     reader that meets a live lock older than its snapshot pushes the
//     lock it met rather than its transaction's primary (txn: push.go,
//     pushLock), and reads past it. Where that lock is a secondary's, the
//     push lands where the commit point does not look, and the
//     transaction commits below the reader's start_ts, missing from its
//     snapshot. Expected: bank (a read snapshot that sums wrong), with
//     reads through locks on.
//   - async-skip-secondary (invariant 4, with txn.Options.AsyncCommit):
//     a resolver deciding an async-commit transaction from its rows does
//     not read its last secondary (txn: async.go, asyncChecked). A
//     transaction whose last row's prewrite is still to come, or was
//     refused, is taken for committed at the others' stamps and rolled
//     forward there, while its owner rolls it back or commits it later.
//     Expected: bank (wrong totals, lost transfers), with async commit
//     on.
//   - stable-unacked (invariant 1's real-time promise): on the embedded
//     store, a Commit returns without raising the newest acknowledged
//     commit_ts that read-only snapshots start above (txn: stable.go,
//     acked), so a read-only transaction begun after the commit returned
//     may start below it and miss it. Expected: register (not
//     linearizable), on the embedded store.
//
// The package imports only the standard library, so every package may
// hook into it.
package mutant
