// Package oracle is the Percolator timestamp oracle: an Allocator that
// hands out strictly increasing timestamps and persists a high-water mark
// ahead of them, and a Client that batches concurrent callers into single
// requests to a Backend.
//
// An Allocator keeps its mark in one of three places:
//
//   - the store it hands out timestamps for (OpenStoreAllocator;
//     storemark.go, the cell's layout in lease.go), under a lease: the
//     oracle of the embedded DB and of `percolator serve`;
//   - an external Mark (OpenMarkAllocator; external.go): the elected
//     oracle of the distributed deployment, oracle/etcd, keeps its mark in
//     etcd and a copy in the store (WriteMirror, ReadMirror; mirror.go);
//   - a file of its own (OpenAllocator with a path; filemark.go), which
//     only `percolator bench`'s oracle figure uses; path "" is an
//     in-memory allocator for tests.
//
// A Backend is an Allocator in this process, or an oracle elsewhere:
// oracle/remote asks a percolator server (its store allocator) over gRPC,
// and oracle/etcd finds the elected oracle through etcd and asks it.
// Throughput measures a Client (`percolator bench`).
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
//     any earlier Allocator on the same mark, handed out.
//  3. Every timestamp handed out is below a mark already durable, and a
//     mark never goes down. A mark file is raised in this order: write it
//     to a temp file, fsync, rename over the mark file, fsync the
//     directory, and only then let Allocate hand out timestamps below it.
//     A store's mark is raised by a CheckAndMutate on the lease cell's
//     exact epoch (lease.go), an external one by a Mark.Write that
//     returned nil.
//  4. Opening resumes at max(1, mark), so by 3 a restart, kill -9 or power
//     loss included, never goes backwards. A store without a mark (new, or
//     its mark lost) resumes above the newest timestamp its data holds
//     (StoreOptions.Recover). A mark that is truncated or fails its
//     checksum is ErrCorruptMark; it is never read as zero.
//  5. One Allocator per mark at a time. A mark file: an flock on
//     path+".lock", which the kernel drops when the process dies (a second
//     opener gets ErrLocked). A store: its lease. Another allocator takes
//     it only once it has run out by the taker's wall clock (at once on a
//     store the caller owns, StoreOptions.Exclusive), and until then gets
//     a HeldError (storage.ErrInUse); the holder hands out timestamps only
//     while its monotonic clock is below the send time of its last
//     acknowledged lease write plus nine tenths of the TTL, and a lease
//     not renewed in time or found taken is ErrLeaseLost. An external
//     Mark: its Usable, checked under the Allocator's mutex at every
//     allocation (oracle/etcd: the term's election lease).
//  6. A Client request serves only the callers that were already waiting
//     when it was sent; a caller that arrives while a request is in flight
//     waits for the next one. So every timestamp a caller gets was
//     allocated after it asked, and is greater than every timestamp any
//     call that returned before it asked got.
//  7. A Client of a remote backend has at most one request in flight,
//     and rejects a reply that is not above the previous one
//     (ErrBadReply) rather than hand out a timestamp twice. A Client of a
//     Concurrent backend (an Allocator in this process) sends each
//     caller's request on the caller's goroutine, and relies on the
//     Allocator's invariant 2 instead.
//
// # The caller's contract
//
//  1. Open one Allocator per mark. On a store: OpenStoreAllocator, with
//     the process's owner ID (the DB and the server do); set Exclusive
//     only when no other process can use the store, and give Recover so
//     that a store without a mark resumes above its data. Processes that
//     share a store must have wall clocks that agree within a tenth of
//     the lease's TTL. Over an external Mark: OpenMarkAllocator, resuming
//     at the mark the caller read, above every timestamp handed out before
//     (oracle/etcd reads the larger of etcd's mark and the store's copy);
//     the Mark's Usable stops the Allocator the moment its term may have
//     ended. In a file: OpenAllocator with the mark file's path (its
//     directory must exist), or "" for an in-memory allocator that need
//     not survive a restart.
//  2. Wrap the backend in a Client with NewClient, shared by all
//     transactions of the process: sharing is what makes batches.
//  3. Call Timestamp for a start_ts, and for a commit_ts only after every
//     lock of the transaction is written: invariant 6 then places the
//     commit_ts after the locks, which is what the snapshot-isolation
//     argument needs.
//  4. Cancel a call's context to abandon it; the timestamp it would have
//     got is skipped, never handed to anyone else.
//  5. Stop all callers, then Close the Allocator. Close waits for an
//     extension already in flight and releases the mark: a store
//     allocator writes its lease free (the mark kept), so the next one
//     takes over at once; the others write nothing. Timestamp afterwards
//     fails with ErrClosed.
//
// # Persisting ahead of the callers
//
// Allocate never waits on the mark's write while at least Window/2
// timestamps remain below the mark: crossing that line starts one
// background write (an fsync, a store write, an etcd Txn) of a mark Window
// above the next timestamp. Only a caller that finds the window used up
// waits for that write. The default Window, 2^22, gives one second of
// headroom at 2,000,000 timestamps/s, and a restart skips at most Window
// timestamps.
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
// A Concurrent backend (an Allocator in this process: the embedded DB's,
// the server's own) is not batched: each caller calls Allocate(ctx, 1)
// itself, under the Allocator's mutex, which serves it alone and honours
// its context, so invariant 6 holds trivially and neither of the
// rejected designs below arises. Batching it bought nothing but a
// goroutine hop: on a busy machine a caller waited for the pump to be
// scheduled again (behind every runnable goroutine once it had yielded),
// and a read-only transaction's start timestamp cost more than its reads.
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
