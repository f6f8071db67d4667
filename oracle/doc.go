// Package oracle is the Percolator timestamp oracle, in process: an
// Allocator that hands out strictly increasing timestamps and persists a
// high-water mark ahead of them, and a Client that batches concurrent
// callers into single requests to a Backend (the Allocator here, a remote
// oracle later).
//
// # Invariants
//
// These carry DESIGN.md's protocol invariant 1: timestamps are strictly
// increasing, across restarts, and a client never reuses one.
//
//  1. Every timestamp is in [1, MaxTimestamp]. MaxTimestamp*1000 < 2^63,
//     so a Bigtable backend can store ts*1000 as a cell time in
//     microseconds and lose nothing to Bigtable's millisecond rounding.
//  2. An Allocator's next timestamp is greater than every timestamp it, or
//     any earlier Allocator on the same path, handed out.
//  3. Every timestamp handed out is below the mark durable in the mark
//     file. A mark is raised in this order: write it to a temp file, fsync,
//     rename over the mark file, fsync the directory, and only then let
//     Allocate hand out timestamps below it. The mark never goes down.
//  4. Open resumes at max(1, mark), so by 3 a restart, kill -9 or power
//     loss included, never goes backwards. A mark file that is truncated or
//     fails its checksum is ErrCorruptMark; it is never read as zero.
//  5. One Allocator per path at a time: an flock on path+".lock", which the
//     kernel drops when the process dies.
//  6. A Client request serves only the callers that were already waiting
//     when it was sent; a caller that arrives while a request is in flight
//     waits for the next one. So every timestamp a caller gets was
//     allocated after it asked, and is greater than every timestamp any
//     call that returned before it asked got.
//  7. A Client has at most one request in flight, and rejects a reply that
//     is not above the previous one (ErrBadReply) rather than hand out a
//     timestamp twice.
//
// # The caller's contract
//
//  1. Open one Allocator per mark file with OpenAllocator; path "" is an
//     in-memory allocator for tests and single-process use that need not
//     survive a restart. The directory of path must exist. An elected
//     oracle (oracle/etcd) keeps its mark in the coordination service
//     instead: OpenMarkAllocator runs an Allocator over that Mark,
//     resuming at the mark the caller read, and the Mark's Usable check
//     (under the Allocator's mutex, at every allocation) stops it the
//     moment its term may have ended.
//  2. Wrap the backend in a Client with NewClient, shared by all
//     transactions of the process: sharing is what makes batches.
//  3. Call Timestamp for a start_ts, and for a commit_ts only after every
//     lock of the transaction is written: invariant 6 then places the
//     commit_ts after the locks, which is what the snapshot-isolation
//     argument needs.
//  4. Cancel a call's context to abandon it; the timestamp it would have
//     got is skipped, never handed to anyone else.
//  5. Stop all callers, then Close the Allocator. Close writes nothing
//     beyond an extension already in flight; Timestamp afterwards fails
//     with ErrClosed.
//
// # Persisting ahead of the callers
//
// Allocate never waits on the disk while at least Window/2 timestamps
// remain below the mark: crossing that line starts one background write of
// a mark Window above the next timestamp. Only a caller that finds the
// window used up waits for that write. The default Window, 2^22, gives one
// second of headroom at 2,000,000 timestamps/s, and a restart skips at most
// Window timestamps.
//
// # Batching
//
// Callers join the waiting batch under a mutex. A caller that finds no
// request in flight starts a pump goroutine, which sends the batch with
// n = the number of callers in it, publishes the result by closing the
// batch's one channel (caller i gets first+i), and then sends the batch
// that filled up meanwhile, if any. The pump exits when none is waiting,
// so an idle Client owns no goroutine. The request runs on the pump, not
// on a caller, so a caller's cancellation returns at once and fails no one
// else.
//
// Rejected design: pre-allocating timestamps before callers ask (fetching a
// range ahead and serving callers from it, or letting a caller that
// arrives during a request share it). It would be faster, and it is wrong.
// Suppose a committer has written its locks and asks for its commit_ts c,
// and is served from a range fetched before its locks existed. A reader
// that, meanwhile, got start_ts r > c from a fresh request may already have
// read the cell, found neither lock nor write, and moved on; the committer
// then commits at c < r, and the reader's snapshot at r misses a write it
// must contain. Percolator's argument needs c to be allocated after the
// locks were written, hence invariant 6.
//
// Rejected design: the first caller of a batch sending the request itself
// and then serving the next batches. A cancelled leader could not return
// until the backend answered, and a leader kept busy by a steady stream of
// batches would not return at all.
package oracle
