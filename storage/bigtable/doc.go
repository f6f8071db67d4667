// Package bigtable is the storage.Store on Google Cloud Bigtable, the
// paper's own substrate, through the official Go client
// (cloud.google.com/go/bigtable). Tests run it against the client's
// in-process emulator (bttest, StartEmulator).
//
// # Layout
//
// One Bigtable table, one column family (Family). A cell (family f,
// qualifier q, timestamp ts) of the model is stored under the qualifier
// f NUL q at the cell time ts×1000 microseconds:
//
//  1. Any model family works without changing the table's schema (the
//     protocol's, and those of later packages), and `init` creates one
//     family. Cloud Bigtable has no locality groups, so one family per
//     model family would buy no isolation: a scan filtered to one family
//     still reads every family of the rows it passes (SharedRows; the
//     cells seen are what ScanCounted reports, from Bigtable's own read
//     statistics).
//  2. Bigtable keeps cell times in whole milliseconds, and the client
//     rounds finer ones down silently: two protocol timestamps 1 apart
//     would land on one cell. ts×1000 keeps every protocol timestamp
//     exact; MaxTimestamp ((2^63−1)/1000) is above the oracle's largest
//     (oracle.MaxTimestamp), and the backend declares it (storage.Limited).
//     A time range maps to [start×1000, end×1000) exactly.
//  3. No garbage-collection rule: cell times are not wall-clock times
//     (ts×1000 µs is an instant in 1970), so an age rule would delete
//     every cell, and a version rule would delete versions the protocol
//     still reads. Init creates the family without one; Open and Init
//     refuse a family that has one (ErrGCRule, naming the rule), changing
//     nothing; RemoveGCRule (`percolator init --fix`) removes it, which is
//     safe to automate: it only stops deletions.
//
// # Calls
//
// ReadRow and Scan are one ReadRows each (the union filter is one
// Interleave of per-selector chains; the duplicates an interleave returns
// for overlapping selectors are dropped). CheckAndMutate is one
// CheckAndMutateRow, Mutate one MutateRow, MutateRows one MutateRows.
// Increment is a loop of a read and a CheckAndMutateRow on the exact old
// value (time and value), not ReadModifyWriteRow, which writes at the
// server's time.
//
// Retries. The client library (cloud.google.com/go/bigtable) re-sends
// MutateRow, and the failed entries of MutateRows, on DeadlineExceeded,
// Unavailable or Aborted, whenever every put carries an explicit time
// (ours all do); it never re-sends CheckAndMutateRow. CheckAndMutate
// returns the error: its outcome is unknown. CheckAndMutateIdempotent
// (storage.Idempotent), which the protocol uses for the conditional
// writes that are safe to apply twice (DESIGN invariant 6), re-sends it.
// Bigtable has no nonces, so nothing else is re-sent.
//
// A re-sent Mutate or MutateRows is idempotent but not safe in any order:
// its first copy may still be applied after the copy that answered, and
// after a later write of the same cell, which a delete (or a put) in it
// then undoes. So every Mutate and MutateRows the library sends is one
// that a late copy cannot harm (DESIGN invariant 10; each call site says
// why): a versioned write, or a put or delete at a version no later write
// re-uses. Over a server the same calls carry a nonce instead, unless the
// caller declares them safe (storage.IdempotentBatcher).
//
// An unreachable Bigtable: the client library retries a call that meets
// Unavailable until the call's context ends. Open, Init and RemoveGCRule
// read the table's description first and bound that by
// Options.OpenBudget (default 30s; cluster.Open passes the DB's
// RetryBudget, the CLI its --retry-budget), then fail with
// storage.ErrUnavailable naming where they looked, so a wrong address or
// a dead emulator fails the command instead of hanging it. A data call
// honours its caller's context only.
//
// Durability: Bigtable acknowledges a write once it is replicated
// durably, so every write is durable on return; there is no Deferred
// variant.
package bigtable
