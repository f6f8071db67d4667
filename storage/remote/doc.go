// Package remote is storage.Store over a percolator server (package
// server), for processes that share one database.
//
// Invariants:
//
//  1. Every call is bounded (rpc/doc.go, "Budgets"): each attempt by the
//     connection's per-call deadline (rpc.DialOptions.CallTimeout), and a
//     call's retries by its retry budget (RetryBudget), the budget of the
//     operation it is part of (rpc.WithOperation), the cleanup budget of
//     one that ended, and the caller's context. A failure the server may
//     recover from (unreachable, restarting, shutting down, an attempt's
//     deadline) is retried with jittered exponential back-off; gRPC
//     reconnects underneath. Anything else is returned at once.
//  2. A call that is not safe to apply twice in any order (Increment,
//     CheckAndMutate, Mutate, MutateRows) carries a nonce (server/doc.go,
//     "Nonces"): it is resent with the same nonce until the server
//     answers, and the server runs it once and answers every copy with the
//     first run's result. Its number stays below the low-water mark the
//     store reports only until its answer arrives (or it is given up). A
//     CheckAndMutate or MutateRows the caller declares safe under any
//     reordering (storage.Idempotent, storage.IdempotentBatcher: the
//     protocol's prewrites, commits, rollbacks and secondary commits), and
//     the calls of storage.Epoched, which only the protocol sends, carry
//     none, and is resent as it is: a copy may then be applied
//     again, late, which the caller has said is harmless.
//  3. The store registers its nonce group before its first call. If the
//     server no longer knows the group (unused past its grace period), a
//     call refused on its first attempt is sent again in a new group; one
//     refused after an earlier attempt may have been applied, and returns
//     rpc.ErrOutcomeUnknown rather than guess.
//  4. A Scan is a stream of batches of rows; a stream broken by a
//     retryable failure resumes after the last row delivered. Its retry
//     budget counts from the last batch received, not from the call's
//     start: a scan that keeps receiving is resumed after any number of
//     breaks, however long it streams, and one that receives nothing
//     (a blackholed connection: CallTimeout bounds each wait for a batch,
//     not counting the time fn takes) fails within the budget.
//  5. Writes are durable when acknowledged, but those of
//     CheckAndMutateRowsDeferred (storage.Epoched: a transaction's
//     prewrites), answered before their log sync with the server's epoch;
//     CheckAndMutateInEpoch and CommitInEpoch (storage.EpochStamper: the
//     server stamps the commit timestamp) are refused
//     (storage.ErrEpochChanged) once the server has restarted since the
//     epoch it carries (txn/doc.go, "Durability over RPC"). The store offers no storage.Deferred
//     variant, and is not storage.Exclusive: no client keeps an index of
//     a shared store. ReadRows (storage.MultiReader) reads several rows
//     in one call.
//
// Options.NoNonces turns nonces off, for measuring what they cost and for
// testing that the duplicate-call test can fail: a resent Increment is then
// applied twice.
package remote
