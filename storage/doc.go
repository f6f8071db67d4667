// Package storage defines the Bigtable-model store that the Percolator
// protocol runs on, and nothing of the protocol itself.
//
// # Model
//
// A store holds rows. A row key is a non-empty byte string; rows sort
// bytewise. A row holds cells; a cell is named by a column — a family and a
// qualifier — and a uint64 timestamp, and holds a value. Families are
// locality groups (Bigtable column families): a backend keeps each family in
// its own keyspace, so a scan of one family never reads another's cells.
//
// # The one atomic primitive
//
// CheckAndMutate(row, predicate, ifTrue, ifFalse) evaluates a predicate
// filter on one row and applies one of two mutation lists, atomically with
// respect to every other call on that row, in one round trip. It maps 1:1
// onto Bigtable's CheckAndMutateRow. Every other write (Mutate, MutateRows,
// Increment) is atomic per row as well, but unconditional.
//
// # Contract every backend keeps
//
//  1. A write that returned nil is durable: it survives a crash of the
//     process and of the machine (for persistent backends). The one
//     exception is the deferred variants of the Deferred capability, made
//     durable by the next durable write.
//  2. A write is visible to every read that starts after it returned. No
//     read returns a durable call's write before it is durable (Store,
//     "Visibility and durability"); a store that cannot make a write
//     durable fails every later call with ErrFailed.
//  3. Writes to one row are linearizable: each call observes the effects of
//     every call on the row that completed before it began.
//  4. Mutations within one call apply in order, all or none.
//  5. Bad input (an empty row, an empty family, a malformed filter) returns
//     an error wrapping ErrInvalidArgument and changes nothing.
//  6. Every method may be called concurrently from many goroutines.
//
// Backends: storage/memory (tests, Dir "" in the facade) and storage/pebble
// (the embedded default). storage/storagetest is the conformance suite that
// each backend runs.
//
// # Optional capabilities
//
// Found by type assertion, never required: Batcher (many rows in one
// durable write), Deferred (writes made durable by the next durable write,
// for stores with one ordered log), Exclusive + ApplyHooker (a single owning process may keep
// in-memory indexes of what it writes in step with the store).
package storage
