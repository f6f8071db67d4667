// Package pebble is the embedded, durable storage.Store on
// github.com/cockroachdb/pebble/v2: the default backend, one process per
// directory.
//
// # Key layout (keys.go)
//
//	cell:     family 0x00 | esc(row) 0x00 0x01 | esc(qualifier) 0x00 0x01 | ^ts (8 bytes BE)
//	metadata: 0x00 ...   ("\x00format", "\x00family\x00<name>")
//
// esc replaces 0x00 with 0x00 0xFF; 0x00 0x01 terminates. Rows (and
// qualifiers within a row) therefore sort bytewise, no encoded row is a
// prefix of another, and the newest version of a column comes first. A
// family holds no NUL, so each family is the contiguous keyspace
// [family 0x00, family 0x01): a Scan of "notify" never reads a "data" key,
// and one row read reads one short range per family. A family is never
// empty, so no cell key begins with 0x00.
//
// # Invariants
//
//  1. Every write (Mutate, CheckAndMutate, Increment, MutateRows and their
//     Deferred variants) holds the latch of each row it writes from before
//     its first read to after its apply hook returns: read predicate,
//     build one batch, apply it (published), call the hook, unlatch; a
//     durable write then waits for its log sync, latch released, so a
//     deferred write of the row need not wait for that sync (invariant 4
//     keeps readers from returning it before it is durable); a durable
//     one takes the latch only once the row's earlier durable writes are
//     synced, so a failed sync stops every one queued behind it. Latches are
//     striped one-slot channels keyed by a hash of the row; MutateRows
//     takes its stripes in ascending order, so latching cannot deadlock.
//     Every wait (a write queued for a latch behind another of its row, a
//     read settling behind a durable write in flight, invariant 4) honours
//     the caller's context: when it ends, the call returns its error,
//     holding no latch and having written nothing. Only a commit already
//     handed to pebble runs to its end (its batch is published; its
//     outcome must not be guessed).
//  2. A durable call that returns nil is in the synced WAL (pebble.Sync;
//     concurrent syncs are grouped by pebble's commit pipeline, and while
//     many writers commit at once the log waits Options.SyncDelay after a
//     sync before the next so that more share it: groupsync.go; a call
//     still returns only once its own sync did). A Deferred
//     call (CheckAndMutateDeferred, MutateRowsDeferred, CheckAndMutateCond
//     with deferred) commits with pebble.NoSync: pebble's WAL is one
//     ordered log whose every sync covers all records before it, so the
//     next durable call, of any caller, makes it durable. No Option turns
//     a durable call into a deferred one; the caller chooses per call.
//  3. One write is one pebble batch, so a reader sees all of it or none of
//     it. Reads take no latch. A ReadRow reads every family through one
//     iterator (re-bounded per family), and a Scan chunk through iterators
//     cloned from one, so each row is read from one point-in-time view.
//  4. No read returns a durable call's write before it is durable.
//     Pebble publishes a batch to readers before its log sync returns,
//     and a durable write releases its latches then (invariant 1), so it
//     records itself, under the latches and before it applies its batch,
//     as the sync in flight of each of its rows' latch stripes (one per
//     stripe: the next durable write of a stripe latches only once that
//     sync returned, invariant 1), and every read settles each row it
//     returns: it waits for the sync in flight on the row's stripe if
//     that write may change what the read selects in the row
//     (storage.Filter.Touches: a put of a selected cell, a delete of
//     selected versions), and never for the writers queued on the latch;
//     a Scan settles each chunk's whole key range, so it does not miss a
//     row that such a write emptied either (a power loss would bring it
//     back). A
//     commit that fails (a failed WAL write, which pebble reports through
//     Logger.Fatalf on the committing goroutine, or a failed sync, which
//     Batch.SyncWait returns) fails the store before its sync is marked
//     done: every later call, and every read that waited, returns
//     storage.ErrFailed, and a reopen recovers exactly what was synced.
//     A write of the row that took the latch meanwhile has read, and may
//     have built on, the failed write: a durable one fails too (its sync
//     cannot succeed after the failed one), and a deferred one is lost
//     with it, as a crash would lose it.
//     Likewise a one-phase commit (CommitOnePhaseGuarded, with a Stamper
//     attached: the owner's oracle) marks its row's stripe as committing
//     under the latch before it takes its timestamp, and lowers the mark
//     once its write is applied, still under the latch (and then waits
//     for its sync, which readers settle on). Every ReadRow, and the owner's index
//     (AwaitOnePhase), first waits while its row's stripe is marked; a
//     Scan, while any is: a read whose timestamp came after the commit's
//     finds the write (txn/doc.go, "One-phase commit"). An async prewrite
//     (PrewriteAsyncGuarded) does the same on every stripe of its rows,
//     and so its locks, stamped with its timestamp, are found by every
//     read whose timestamp came after it (txn/doc.go, "Async commit").
//     AwaitAllOnePhase is a scan's wait, for an index kept by the hook
//     (the server's locks) before it is asked. Reads made under a
//     latch go through UnderLatch, which waits for nothing.
//  5. The apply hook runs once the batch is applied (published), before
//     it is durable and before the row latch is released, once per
//     row with mutations, in the order writes were applied to that row
//     (for CheckAndMutate: the branch that ran, if not empty; for
//     Increment: DeleteCells of every version, then the Put at timestamp
//     0). A Deferred write is hooked before it is durable, as it is
//     visible to reads then. One hook at a time (storage.ErrInUse).
//  6. Deletes are point deletes of the versions found under the latch
//     (through the batch when it already holds writes, so a later delete
//     sees an earlier put of the same call). Range tombstones were rejected:
//     each iterator over a memtable holding them re-fragments them, which
//     taxes every read of a busy store.
//  7. DeleteRow visits every family ever written, from a registry persisted
//     as metadata keys in the batch of a family's first Put and loaded at
//     Open. A family joins the in-memory registry only after that batch
//     committed.
//  8. Bad input is rejected (storage.ErrInvalidArgument) before any latch
//     is taken or any byte written.
//  9. Close waits for the calls in flight, flushes the memtable, lets the
//     level-0 compaction that calls for run (and, after a process wrote
//     32 MiB or more, compacts the store), then closes pebble: the next
//     process to open the store replays no log and inherits no compaction
//     debt, which pebble's Open would wait for. Later calls return
//     storage.ErrClosed. Scan holds no iterator (and does not
//     count as in flight) while its callback runs, so the callback may call
//     back into the store, or Close it.
//
// # Reads
//
// A filter of one selector naming one qualifier at one timestamp
// (Time.End == Time.Start+1) is a point Get of one key. Bloom filters are
// built over columns (the comparer splits a cell's key into its column and
// its timestamp, keys.go), on every level, so a point read of a column no
// table holds reads only memtables and filters: a row read seeks each
// column with SeekPrefixGE. Otherwise each column is read by seeking to the
// newest timestamp any selector wants (versions < End start at ^(End-1))
// and stopping at the first version no selector can still take (older
// than every Start, or every Limit reached).
//
// # Families in their own tables; counted scans
//
// Flushes and compactions end every sstable at a family's end
// (familySpans, pebble's SpanPolicyFunc), so each family is also its own
// set of tables, as the paper's locality groups are: CompactFamily
// rewrites one family's tables and none of the data's, and compacting the
// notify family after many clears is cheap. ScanCounted reports pebble's
// count of the points its iterators visited, tombstones included, which is
// what a scan over many deleted cells really costs.
//
// # A nearly full disk
//
// Garbage collection needs log space to free space: its deletions are
// written before anything is dropped, and freed space comes back only
// once a flush and a compaction rewrote the files. So the store keeps a
// reserve (Options.DiskReserve, 64 MiB by default, at least two
// memtables): a file, percolator-reserve, whose blocks are allocated.
// While the disk's free space is below the reserve's size plus what the
// store's compactions still have to write (pebble's estimated compaction
// debt and the compactions in progress: a compaction writes its output
// before it deletes its inputs, so a store that let its writes take that
// space would leave its compactions, and the flushes and writes waiting
// on them, failing with ENOSPC forever), the store is low
// (storage.Reserver): it removes the file, so its space is free, and
// refuses every write with storage.ErrNoSpace but those whose context
// storage.WithReserve marks (the collector's removals and the lock
// resolutions they need, the commits and rollbacks of transactions
// already prewritten, the oracle's mark, which is replaced in place, the
// nonce table's forgetting). It takes the reserve back, and accepts
// writes again, once three times its size is free. The free space is read
// at most a second apart (pebble's GetDiskUsage); a write that meets a
// full disk between two readings (another process filled it, or a
// compaction's output did) makes the store low at once and is retried
// once the reserve is gone (vfs.OnDiskFull), so a full disk never fails
// the store as a failed log write would. TestDiskReserve fills a
// filesystem with a quota both ways; the root package's TestGCOnFullDisk
// fills a server's and collects.
//
// Open takes pebble's directory lock first; a second Open of the same
// directory, from this process or another, fails with a *LockedError
// (errors.Is ErrLocked and storage.ErrInUse) naming the holding process
// when it can be learned; a lock file that cannot be created (a permission
// error) is reported as that, not as a held lock.
package pebble
