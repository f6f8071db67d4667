// Package memory is an in-memory storage.Store: the backend of tests and
// of a database opened without a directory. Nothing survives Close or the
// process; "durable" (storage contract 1) means "visible to every later
// read" here.
//
// # Layout
//
// Each family is its own keyspace: a map from row key to the row's cells in
// that family (for point reads) and a skiplist over the same rows (for
// ordered scans), so a Scan of one family never visits rows that only have
// cells in another. Within a row, columns are sorted by qualifier and
// versions by timestamp, newest first.
//
// # Invariants
//
//  1. One RWMutex guards everything. Reads (ReadRow, each chunk of a Scan)
//     hold it shared; writes hold it exclusively from the predicate read
//     through the apply hook. This makes every write atomic and every row
//     linearizable, and orders the hook calls of a row as the writes were
//     applied.
//  2. Values are copied on the way in and on the way out: no slice is ever
//     shared between the store and a caller.
//  3. A row with no cell left in a family is removed from that family.
//  4. Bad input is rejected before the lock is taken; nothing changes.
//  5. Scan never holds the lock while its callback runs (the callback may
//     write to the store): it reads up to 64 rows, releases the lock, then
//     delivers them. Each row is a consistent view; the range is not.
//
// Per-row latches were considered and rejected: an in-memory write takes
// well under a microsecond and has no durability wait to overlap, so a
// single lock costs little and keeps the hook ordering trivially right.
//
// Increment reports its effect to the apply hook as two mutations: a
// DeleteCells of every version of the column, then a Put at timestamp 0.
package memory
