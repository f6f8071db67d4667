// Package txn is the Percolator transaction protocol: cross-row
// snapshot-isolation transactions over a storage.Store whose only atomic
// primitive is the single-row CheckAndMutate.
//
// # Layout
//
// Each user cell (row, c) is kept in three families (locality groups) of
// the same row: (lock, c) holds a lock record at the owner's start_ts,
// (write, c) holds commit records at commit_ts (pointing at start_ts; a
// lock-only one, "Write skew" below, at no data) and rollback records at
// start_ts, and (data, c) holds values too large to
// inline (InlineSize) at start_ts. Small values travel inline in the lock
// and then the commit record, so a read of a small value is one read. A
// primary lock's heartbeats are versions of a fourth family (FamilyBeat,
// heartbeat.go), kept apart from the lock so that a late beat cannot move
// its time back; the pushes of readers through locks are versions of a
// fifth (FamilyPush, push.go; "Reads through locks" below). A lock of an
// async-commit transaction is a record of version 2 that also names its
// secondaries and ends in its stamp ("Async commit"); every other record
// is of version 1.
// record.go has the encodings; the files are the phases: prewrite.go,
// commit.go, onephase.go, async.go, get.go, scan.go (one column of a range of rows), scanrows.go
// (every user column of whole rows: what a backup reads), resolve.go,
// heartbeat.go, push.go.
//
// The whole layout has a version, FormatVersion (formatversion.go), which
// the store records in a reserved row at creation and every Open checks
// (EnsureFormat): a build reads and writes stores of its own version only,
// so no process writes records another process on the store cannot read.
// Each record also begins with its record version; a record of a newer
// version, or with an operation this build does not know, is a
// *FormatError (ErrFormat) to every reader, never a lock to roll back.
// Version 2 added garbage collection (its fence family and safe point
// row); a version-1 store is moved to it by Upgrade, which runs alone on
// the store, since a version-1 process would write without checking
// fences.
//
// # Caller's contract
//
//  1. Begin takes start_ts from the oracle (a read-only transaction on
//     a store one client owns: one above the newest commit it
//     acknowledged or returned, "Read-only snapshots"). Get, GetMany and Scan read
//     the snapshot at start_ts; Set and Delete only buffer; GetForUpdate
//     reads as Get and buffers a lock-only mark of the cell.
//  2. Commit picks the first buffered write as the primary (the first put
//     or delete when there is one) and prewrites its row, then the other
//     rows (in parallel): one CheckAndMutate per row that applies only if
//     no cell has another transaction's lock or a write record at or
//     after start_ts, and then writes the lock records (naming the
//     primary, this process as owner, a wall time and a TTL) and the data.
//  3. A conflict rolls back what was prewritten (the primary's row first,
//     alone; then the other rows, blind and batched) and returns a
//     *ConflictError (errors.Is ErrConflict).
//  4. Commit takes commit_ts from the oracle, then commits the primary's
//     row with a CheckAndMutate on the primary lock: commit records at
//     commit_ts, locks erased at start_ts. That write is the commit point.
//     Where readers push ("Reads through locks") it also requires that
//     no push stands at or above commit_ts, and a refused one is sent
//     again at a new commit_ts.
//  5. Then the other rows get their commit records, blind and batched.
//     Commit returns nil; a failure here is left to readers.
//
// Over a server (storage.Epoched) steps 2 and 5 ride with others: the
// prewrites of every row go in one call, and the secondaries' commit
// records in the commit point's ("Durability over RPC").
//  6. When the primary commit's outcome cannot be learned, Commit returns
//     ErrCommitUnknown, never success or failure.
//
// # Invariants (DESIGN.md, "Protocol invariants"; numbers as there)
//
//  1. Timestamps come from the oracle client, whose batching serves only
//     callers already waiting, so commit_ts exceeds every timestamp handed
//     out before the prewrites returned.
//  2. Every read, read-only transactions included, waits on or resolves
//     every lock with start_ts below its own before reading past it (get.go,
//     scan.go). The seeds' annotation that plain reads may skip the lock
//     check is wrong and not followed. With Options.ReadThroughLocks a
//     read may instead push the lock's transaction above its snapshot
//     ("Reads through locks"): that settles the lock for that snapshot.
//  3. Of two concurrent transactions writing one cell at most one commits:
//     the later prewrite sees the other's lock or its newer commit record.
//  4. The primary lock is the commit point. A secondary lock is rolled
//     forward whenever the primary committed, by anyone; it is rolled back
//     only after the primary was, which needs its owner dead (coord
//     liveness) or its lock expired, and is done with a CheckAndMutate on
//     the primary lock (resolve.go). An async-commit transaction departs
//     from this on purpose: it has no single commit point, and is
//     committed once every row holds its lock ("Async commit" argues
//     it, as DESIGN.md's invariant 8 asks).
//  5. A rollback leaves a rollback record at start_ts in the write column.
//     A delayed prewrite then finds a write at or after its start_ts and
//     applies nothing; a commit needs the lock the rollback erased.
//  6. Every storage call is safe to send twice, late or out of order:
//     prewrite's predicate ignores the transaction's own lock; the primary
//     commit is conditional on the lock and, when it finds none, succeeds
//     only on finding its own commit record at its commit_ts; locks are
//     erased only at their exact start_ts.
//  7. The heartbeat refreshes the primary lock's wall time with a
//     CheckAndMutate on that lock, never blind. It adds a beat whose
//     version is the wall time rather than rewriting the lock, so a late
//     copy of an older beat (or of the prewrite) cannot move the lock's
//     time back: readers take the newest.
//  8. No one-phase commit, async commit or store-computed commit_ts
//     without a written argument here, `percolator verify` passing it,
//     and a mutant of it that verify catches: "One-phase commit" (the
//     mutant one-phase-early-ts), "Async commit" (async-skip-secondary;
//     its commit_ts is the oracle's, stamped by the store under the
//     latch, never computed by it). Reads through locks, which TiKV's
//     history shows is as easy to get wrong, ships on the same terms: the
//     argument is "Reads through locks", the mutant push-secondary. So
//     do read-only snapshots taken above the newest acknowledged commit
//     rather than at a fresh timestamp: "Read-only snapshots", the mutant
//     stable-unacked.
//  9. Garbage collection works below a safe point that only moves
//     forward: no snapshot at or above it loses a version it reads, a
//     read whose start_ts is below it fails with ErrSnapshotTooOld and
//     returns nothing, a lock below it is resolved before anything of its
//     row is removed, and no prewrite below it can land on a row it
//     collected. The argument is "Garbage collection" below; it is the
//     design the collector is built to, and no collection ships before
//     it does all of it.
//
// # Write skew
//
// Snapshot isolation checks write-write conflicts only, so two
// transactions that each read a cell the other writes both commit: two
// doctors on call each read that the other is on call and go off call,
// and nobody is left (write skew). GetForUpdate reads a cell as Get does
// and marks it for a lock-only write (OpLock): at commit the cell is
// prewritten with an OpLock lock under the same predicate as any write,
// and committed as an OpLock write record that points at no data. Each
// of the two transactions then writes both cells, one with its value and
// the other lock-only, so they write-write conflict on both and at most
// one commits (invariant 3); a GetForUpdate conflicts in the same way with
// any concurrent writer of the cell, and with another GetForUpdate of it.
// A Set or Delete of the cell in the same transaction takes the mark's
// place.
//
// Readers ignore OpLock records as they ignore rollback records: Get,
// Scan and CommitTS read the newest put or delete, the owner's index
// never takes one for a cell's latest commit, an OpLock prewrite sets no
// notification, and the observers' dirty check (CommitTS) does not see
// one. Locks are resolved as any other: rolled forward, an OpLock lock
// becomes an OpLock record, and rolled back, a rollback record. The
// collector removes OpLock records below the safe point ("What goes, per
// cell"), the newest of a cell included, so the primary is a put or a
// delete whenever the transaction has one: a primary's commit record is
// what its secondaries are rolled forward from.
//
// # Budgets and cancellation
//
// A commit is one operation of the store (Options.Operation; over a
// server, rpc.WithOperation), its abort and cleanup included, and so is a
// read with its lock waits and resolutions: a store that retries on its
// own (storage/remote) bounds the operation's retries as a whole, so the
// client's own re-sends (StoreRetries) and the calls of an abort do not
// each get a budget of their own. A commit whose server stays away fails
// within that budget: with the store's error (rpc.ErrUnavailable) before
// its commit point, with ErrCommitUnknown at it.
//
// Cleanup goes on after the caller's context ends, for CleanupTimeout
// (default 1s) and not longer: a rollback of what was prewritten, and the
// commit point once reached (commitPrimary, the reading of its outcome,
// the secondaries), so that a cancellation does not leave a commit
// half-rolled-forward while the store answers. When it does not answer in
// time, a commit point's outcome is ErrCommitUnknown, and what is left is
// settled by readers from the primary, as after a crash: rolled forward
// if the primary committed, rolled back once the owner is dead or the
// lock expired (invariant 4). The heartbeat's beat in flight ends with
// the commit. A cancelled commit therefore returns within CleanupTimeout
// whatever the store does.
//
// # The single owner's index
//
// When the store is Exclusive (one process owns it, as the embedded Pebble
// store), the client keeps the lock keyspace and each cell's latest
// commit_ts in memory (index.go), changed by the store's ApplyHook under
// the row latch in the order of the durable writes, and rebuilt from the
// lock family at open. The lock check then costs a map lookup and a read of
// a cell whose latest commit is known costs one exact-key read. index.go
// states why readers may consult it without the latch.
//
// Writers consult it under the latch (storage.Conditioned): the prewrite
// predicate (no lock at another start_ts, no write record at or after
// start_ts) and the commit point's "my primary lock is there" are decided
// from memory, where the index is exact for the row. The index also counts
// every write record the hook has seen, so it can answer "a write record
// at or after start_ts?" for any start_ts above a base (a timestamp issued
// after the hook was installed: anything older was written before it) and
// above the floor left by dropping a full map. Below those it declines and
// the store reads the predicate. A fresh transaction's prewrite therefore
// reads nothing from the store.
//
// # Durability
//
// A Commit that returned nil survives a crash of the process and the
// machine. On a store with one ordered write-ahead log (storage.Deferred:
// the embedded Pebble store) only the commit point waits for the log sync:
//
//  1. Prewrites are applied without waiting for the sync. Each one has
//     returned before the primary's commit is sent, so it precedes the
//     commit record in the log, and the commit's sync makes it durable too.
//     A crash before that loses a transaction that never committed.
//  2. The primary's commit is a durable write: the commit point.
//  3. Secondary commits are applied without waiting for the sync. A crash
//     that loses one leaves the secondary's lock (durable by step 2), which
//     the next reader rolls forward from the durable primary: the same
//     value any reader saw before the crash. A later durable write makes it
//     durable anyway.
//
// Rollbacks, heartbeats and resolutions stay durable writes. So a
// single-row transaction costs one log sync, as a raw synced write does,
// instead of two. On stores without one ordered log (Bigtable) every write
// is durable on return and the argument is not needed.
//
// Reads are the other half. A reader must never return a value, nor decide
// that a transaction committed, on the strength of a commit point that is
// not yet durable: a power loss would take it back after the reader acted
// on it. Pebble publishes a synced batch to readers before its sync
// returns, so the store promises it instead (storage.Store, "Visibility
// and durability"): every read of the store waits for a durable write in
// flight on the rows it returns, and a store whose sync failed fails every
// call (storage.ErrFailed) rather than return what the failure may lose.
// The index adds nothing here: its hook runs after the sync. Unsynced
// locks and secondary commits stay visible, which is harmless: a lock is
// what readers must see, and a lost secondary commit leaves its lock,
// rolled forward from the durable primary to the same value.
//
// TestPowerLoss (root package) runs a bank on a crashable filesystem and
// cuts the power (vfs.MemFS.CrashClone, keeping none, some or all unsynced
// data), sometimes while the log's syncs are held and readers race the
// published commits, then fails those syncs: every acknowledged transfer
// and every value a reader returned survives, and no commit whose sync
// failed is acknowledged. It fails if reads skip the wait, or if a failed
// commit is reported.
//
// # Durability over RPC
//
// The argument for deferred prewrites rests on one premise: a crash that
// loses a prewrite also kills the client that made it, which then never
// sends its commit. Over RPC (storage/remote) that does not hold: the
// server can lose its power and restart between a client's prewrites and
// its commit point, and the client, holding the prewrites'
// acknowledgements, commits the primary on the restarted server. Had a
// secondary's lock been unsynced while the primary's was synced (by any
// other client's durable write in between), the commit point would be
// durable and the secondary's write gone: half a transaction.
//
// So the server counts its runs, its epoch: a durable counter in a
// reserved row of its own, raised at every start before it serves
// (storage.Epoched; server/epoch.go). Over a server, a transaction
// (epoch.go):
//
//  1. Sends all of its prewrites in one call (CheckAndMutateRowsDeferred;
//     chunks of at most 512 rows, or about 4 MiB, for a large one): the
//     server checks each row's predicate under its latch, applies the
//     rows that pass in one batch, and answers before the batch's log
//     sync, with its epoch. Rows blocked by a lock it resolves are sent
//     again, in a later call; calls answered in two epochs fail the
//     transaction (a ConflictError: it is retried whole).
//  2. Sends its commit point with that epoch (CheckAndMutateInEpoch): the
//     server compares the epoch with its own under the latches of every
//     row the call writes, and applies nothing, answering
//     storage.ErrEpochChanged, unless they are equal. If they are, every
//     prewrite the client holds an acknowledgement for was applied by
//     this run of the server, before this call took its latches, so in
//     the one ordered log before the commit's record: the commit's sync
//     makes them durable too, and a crash that loses one loses the commit
//     point with it. A refused commit point is settled as a failed one
//     (settleCommit): the primary's lock, if it survived, is rolled back,
//     and the transaction fails with a ConflictError, changing nothing.
//  3. The secondaries' commit records ride in the same call (as many as
//     one prewrite chunk holds; a larger transaction's others follow it,
//     as commitSecondaries sends them), applied in the same batch only if
//     the primary's predicate held: one round trip and one synced write
//     on the commit's path where there were two. They
//     are blind, as commitSecondaries' are: the primary's lock was there
//     under the latch, so no secondary was rolled back (invariant 4), and
//     by step 2 every secondary lock is durable with them.
//
// Commit records sent after the commit point (a large transaction's
// secondaries past the first chunk, an async commit's records) go in
// calls answered before their log sync as well: a restart that loses one
// leaves its lock, made durable by the commit point (or the async
// prewrite), which readers roll forward to the same commit.
//
// A re-sent prewrite call is safe in any order (invariant 6: the
// predicate ignores the transaction's own lock), and a re-sent commit
// point finds the lock gone once a copy applied; a copy refused for its
// epoch applied nothing, and settleCommit reads the primary to learn
// whether an earlier copy did. A restart therefore costs the transactions
// in flight between their prewrites and their commit points a retry, even
// those whose prewrites happened to be synced; it costs nothing else.
// Rollbacks, heartbeats, resolutions and the commit point stay durable
// writes.
//
// The commit timestamp is the server's (storage.EpochStamper,
// CommitInEpoch): the server runs the oracle, so the commit point asks
// it for the timestamp instead of fetching one first. Under the latches
// of every row the call writes, after the epoch check and once the
// primary's lock is found, the server takes a timestamp c from its
// oracle, checks the observer registry's version if the client named
// one, and writes the commit records at c with the rest of the call.
// It is a commit timestamp taken after every prewrite, as step 2's
// would be, and later:
//
//   - Snapshot isolation (invariants 2 and 3) needs nothing new: the
//     primary's lock stays until the write, so a reader whose start_ts
//     is above c finds the lock (and waits, or resolves it through the
//     primary, whose latch it then waits for) or the commit record, as
//     it would with a timestamp the client took; c is above every
//     start_ts handed out before the call, so above every writer's that
//     read these cells before the prewrites.
//   - Pushes (reads through locks) need no unless: a push is written
//     under the primary's latch at a reader's start_ts, handed out before
//     the push; the call holds that latch when it takes c, so every push
//     it can meet is below c, and a push after it finds no lock.
//   - Registrations: the server reads the registry's version once c is
//     taken, under the latches, and refuses the call, applying nothing
//     (storage.ErrObserversMoved), unless it is the one the prewrites
//     were built under; the client then re-reads the registry, writes
//     the notifications the new one asks for, takes a timestamp itself,
//     and commits as above. A registration raises the version before its
//     backfill scans, so one the check did not see scans after the
//     locks were written and finds them or their commit records: the
//     client's re-read after the prewrites argued the same, at the same
//     point of the order.
//   - Retries (invariants 5 and 6): a copy of the call after one applied
//     finds the lock gone and applies nothing; the client never learned
//     c, so settleCommit accepts a commit record of its own at any
//     timestamp (only this transaction's commit point, or a roll-forward
//     from it, writes one with its start_ts). A server older than the
//     call answers storage.ErrNoOnePhase, applying nothing, and the
//     client takes its commit timestamps itself from then on.
//
// The start timestamp is the server's as well where the transaction's
// first operation is a read (Client.BeginDeferred; DB.Update and DB.View
// begin so): ReadRowsFresh (storage.FreshReader) takes a timestamp s
// from the server's oracle, then reads every row below it, and s is the
// transaction's start_ts. It is a start timestamp handed out after the
// transaction began and before its first read, as Begin's is, only
// later:
//
//   - Invariant 1 and real time: a transaction that committed before
//     this one began had its commit timestamp handed out before, so
//     below s; s is above every timestamp the client's oracle handed
//     out before the call (one allocator hands out both).
//   - Invariant 2: the reads begin after s was handed out, so, as every
//     read of the server, they wait for a one-phase or async commit in
//     flight whose mark was raised before its timestamp was taken, and
//     for a durable write's sync; a two-phase commit below s left its
//     lock or its commit record. A read cut below s selects what a read
//     at start_ts s selects.
//   - A copy of the call sent again takes a timestamp of its own and
//     writes nothing; the client takes the reply's timestamp, the one its
//     rows were read below. It adds s to its active set (which holds the
//     safe point back) when the reply comes, as Begin adds its own when
//     the oracle's reply comes.
//   - A transaction that writes without reading, scans first, or asks
//     for StartTS takes its timestamp from the oracle, as Begin does. A
//     server older than the call answers storage.ErrNoOnePhase, and the
//     client takes start timestamps from the oracle from then on.
//
// The mutant fresh-read-stale reads below a timestamp the server handed
// out to an earlier call: a read misses a write acknowledged before it
// began, which verify's register workload over a server catches
// (TestVerifyMutants); TestReadRowsFresh (server) checks the cut, and
// TestDeferredStart the client's side, with an older server.
//
// A two-row transaction over a server is then three round trips (its
// reads in one GetMany, with its start timestamp; its prewrites; its
// commit) and waits for one log sync, its commit point's.
//
// The mutant commit-stamp-early takes c before the latches (from the
// oracle, then holds the call until a reader pushed the primary, 200 ms
// at most) and sends it without an unless, as a stamped call is: the
// push stands above c, and the commit applies below a snapshot that read
// past its lock; verify's bank over a server with reads through locks
// catches it (TestVerifyMutants). TestCommitInEpoch
// (server) checks the stamp: between the timestamps
// handed out before and after the call, on every record, none on a copy.
// TestReadThroughLocksOverServer pushes a stamped commit and one whose
// client took the timestamp first (the latter refused and sent again);
// TestCommitOlderServer commits against a server without the call.
//
// TestRemoteRestartDurability runs a two-row transaction against an
// in-process server on a crashable filesystem and cuts the power once the
// secondary's prewrite is acknowledged: in the call that also prewrote
// the primary (both made durable by another client's write), or in a
// later call of its own after the client resolved a stale lock there
// (only the secondary's lost); the reply lost (the client re-sends its
// prewrites to the new server) or delivered; a second cut comes at the
// commit point or after Commit returned. Commit must return nil or a
// conflict, readers must see all of the transaction or none, and all of
// it after nil. TestRemoteRestartDurabilityMutant sends the commit point
// to the server's store without the epoch check, and the check must catch
// half a transaction: a commit record whose data is gone.
//
// # Garbage collection
//
// A store that keeps every version grows with every commit, and its scans
// step over every old version. The collector removes versions no snapshot
// will read again. (Written before the code, as DESIGN.md asks; the
// collector, the safe point's row and the fence came with store format 2.)
//
// The safe point S is a timestamp below which no snapshot is read again.
// It is stored durably in a reserved row this package owns and only moves
// forward: a write of S' is a CheckAndMutate that applies only while the
// stored value is below S'.
//
// Choosing it. The collector samples a fresh oracle timestamp T and notes
// its own monotonic clock m; it may propose T only once GCLifetime
// (default 10 minutes) has passed on that clock since m. Oracle
// timestamps are counters, not times: the lifetime is what turns "T is
// old" into a duration, and a sample lives only in the collector's
// memory, so after a restart or an oracle failover nothing is collected
// for one lifetime. The proposal is then held back to just below the
// oldest start_ts any live transaction or registered long reader needs, as
// each process publishes it through what already tracks it: in-process
// when embedded, the server's sessions, etcd leases on Bigtable. Just
// below, so that the transaction both reads its snapshot and may still
// write a row collected meanwhile (the row's fence, the safe point, is
// below its start_ts; what a pass removed is below its snapshot, and its
// conflict check looks only at and above its start_ts). Registration is for
// progress only (a registered reader is not failed); safety rests on the
// check below, so a transaction paused between Begin and its registration
// for longer than the lifetime fails rather than read a collected
// snapshot.
//
// Reading. Every read, after it returns and before it hands anything
// back, checks that its start_ts is at or above the safe point, else it
// fails with ErrSnapshotTooOld. A process may cache the safe point for at
// most SafePointCache (a bound measured from when it sent the read of the
// row, on its monotonic clock; an older cache is read again). The
// collector deletes below a new safe point S' only once S' has been
// durable for longer than that bound, measured from when its write
// returned, plus a margin for clock rates. Then a read that a deletion
// below S' reached ended after the deletion began, so its check used a
// value read after S' was durable: at least S', above the read's start_ts
// whenever the deletion could matter to it (a snapshot at or above S'
// loses nothing: see below). The check is after the read, not before: a
// read that passed a check first could be overtaken by a collection.
// A collector whose client owns the store alone (Indexed: the embedded
// store, one client per store) needs no wait: every reader of the store
// reads through that client, whose cache the collector raises once S' is
// durable and before it deletes; a read checked against the older value
// had returned before the raise, so before the deletion.
//
// Removing, one row at a time, fenced. Every removal from a row is one
// CheckAndMutate whose predicate requires that the row holds no lock
// below S, and which raises the row's GC fence, a cell at version S in a
// family of its own, to S. Every prewrite's predicate fails on a fence
// version at or above its start_ts (a conflict: the transaction retries
// above the safe point). So a prewrite below S that arrives after the
// collection, delayed, retried or of a transaction resolved as dead,
// cannot land on collected history; and one that landed before holds a
// lock, which keeps the collector out of the row until the lock is
// settled. The later commit paths need that lock (the commit point, and
// rolling a secondary forward), so a fence never strands a commit. A
// live owner's unexpired lock below S makes the collector skip the row
// and try again later (invariant 4: it may not be rolled back); a lock
// whose owner is dead or expired is resolved first, as a reader resolves
// it.
//
// On a store with one ordered log (storage.Deferred) a row's removal is
// not waited for: lost in a crash, it takes its fence with it (one batch)
// and leaves the row's history whole, which the next pass collects.
//
// Splitting a pass (Bigtable: the workers, by etcd membership). One
// process proposes safe points; every member collects the rows whose hash
// modulo the members' number is its index, below the stored S, once it
// has itself known S for the wait above: it read S after S was durable,
// so S has been durable at least that long. Every removal stands on its
// own row's predicate and fence, so any assignment of rows to processes
// is safe: members that disagree about the list (one joined or left)
// visit some rows twice or leave some to the next pass. Each share keeps
// its own cursor. Every member runs the Locks-first phase over the whole
// keyspace (a secondary's lock may be in any share, its primary in
// another).
//
// Locks first. A pass below S first resolves every lock in the store
// below S that a reader could resolve (its transaction decided, or its
// owner dead or expired), and only then removes anything. A removed
// commit record may be a primary's whose secondaries still hold their
// locks (its owner died after the commit point): resolved later, from a
// primary with no record, such a secondary would be rolled back although
// its transaction committed. After the first phase no such lock is left
// below S: a transaction whose commit record is at or below S reached its
// commit point before S was sampled, so its locks were all written
// before, and the phase found them; a lock the phase leaves (a live
// owner's, not yet at its commit point) belongs to a transaction that
// commits above S, whose records a pass keeps. TestCollectLocksFirst
// fails without the phase.
//
// What goes, per cell. A snapshot at start_ts s >= S reads the newest put
// or delete record at or below s. Records above S are kept; so is the
// newest put or delete at or below S, with the data at the start_ts it
// points to: every such snapshot reads what it read before. Older write
// records and their data go. A removed record can matter to nothing else:
// a prewrite's conflict check at start_ts t < S asks for a record at or
// after t, and the kept record is newer than any removed put or delete;
// any such prewrite fails on the fence anyway, which is all a removed
// rollback or lock-only record did. The kept delete record goes too,
// leaving the cell empty, only when the fence covers it and no observer's
// ack of the column is below it: the observers' dirty check compares the
// newest commit_ts with the ack, and removing an unprocessed delete would
// make the cell look clean (a lost notification). Rollback records below S
// go only in a call that raises the fence over them: the fence does their
// work from then on, for every start_ts below it. The observers' fences of
// notifications written ahead (rollback records too) follow the same rule,
// and so do lock-only (OpLock) records, which no snapshot reads, the
// newest of a cell included. Of each observer's ack column only the newest
// version is kept. Pushes below S go, every one ("Reads through locks",
// The collector). Notification versions are never removed by the
// collector: only a worker's clear removes them. An observer registered
// after a delete record went finds no record of the cell, as if it had
// never been written: it never saw the value the delete removed either.
//
// How it goes. Of each column and family, the removed versions below the
// lowest kept one go in one delete of the time range [0, t+1), t the
// newest of them as the collector read them (never an open range: t+1 >
// 0); the others one by one. Nothing the read did not see lands in that
// range before the removal applies: a version at or below S needs a
// prewrite below S, whose lock the removal's condition refuses and whose
// later arrival the fence refuses, or is a rollback record the fence
// covers. On Bigtable one range is one operation however many versions
// it holds.
//
// Lock, queue and graph rows hold tokens and store-clock times, not
// oracle timestamps: the collector leaves their families alone, their
// packages clean their own tombstones, and a lock's fencing-token counter
// is never deleted.
//
// # One-phase commit
//
// A transaction whose writes fall in one row commits in one conditional
// write, with no lock (onephase.go), where the store is owned by one
// process that also runs the timestamp oracle and takes the commit
// timestamp itself under the row's latch (storage.OnePhaser: the
// embedded store a DB opened with its own oracle, and a percolator
// server; on Bigtable the oracle is another process, which cannot hand
// out a timestamp under a row's latch, so one-phase commit is off there).
// Options.TwoPhaseOnly turns it off.
//
//  1. The call: under the row latch, the store marks the row's latch
//     stripe as committing; then the predicate, a prewrite's (no lock of
//     another transaction, no write record at or after start_ts, no GC
//     fence at or above it, in any written cell); if it selects nothing,
//     the store takes a timestamp c from its process's oracle, checks the
//     observer registry (below), writes the data at start_ts and the
//     commit records at c in one durable batch, lowers the mark once the
//     write returned (visible, durable, and applied to the owner's
//     index), and releases the latch.
//  2. Every read of the store that returns data (ReadRow, Scan, and the
//     owner's index before it answers from memory) first waits while a
//     mark is up on its row's stripe (a scan: on any stripe), by taking
//     and dropping the latch.
//
// Snapshot isolation holds. A reader whose start_ts T > c got T after c
// was handed out (the oracle's mutex orders them), so after the mark was
// raised; its read began after that, found the mark up (and waited for
// the write) or already lowered (the write returned): either way it reads
// the commit records (invariant 2). A reader with T < c must not see the
// write, and does not: its reads stop below T. Readers of other rows
// never wait. Write conflicts (invariant 3): the predicate and the write
// are under the row latch, which every prewrite and every other
// one-phase commit of the row also takes; a concurrent writer of a cell
// either prewrote first (its lock is selected), committed first (its
// record at or after start_ts is), or comes after and finds this record,
// at c, at or after its own start_ts; unless its start_ts is above c, and
// then the two are not concurrent. c is above start_ts: start_ts was
// handed out before the transaction began, c during its commit.
//
// Registrations. A client with an observer registry commits a row with an
// observed column in two phases (its lock's notification announces the
// change). A registration that lands during a one-phase commit built
// under the registry before it is caught at the latch: the commit, once
// its timestamp c is taken, compares the registry's version with the one
// it was built under (the owner's in memory; over a server the stored
// version, read by the server) and applies nothing if it moved; the
// client then commits in two phases under the new registry. A
// registration raises the version, then its backfill takes a timestamp
// b and scans the column's cells. If c < b, the backfill's scan began
// after c was handed out, so it waits for the commit's mark and finds its
// records; if c > b, c was handed out after the version moved, and the
// check refuses the commit.
//
// Retries (invariant 6): a copy of the call after the first applied finds
// the first's commit records (at c >= start_ts) and applies nothing; the
// client then reads the first cell's status, which finds its own commit
// record (a write record whose start_ts is its own) and reports the
// commit. A call whose outcome stays unknown is settled by writing a
// rollback record at start_ts in the first cell, conditional on no write
// record there at or after start_ts: every copy still to come finds it
// and applies nothing (invariant 5), and if a copy had applied, the
// condition finds its record and the status says committed. So is a
// commit refused by a conflict after a copy of it failed: that copy may
// be delayed, not lost, and land once what refused the later one is gone
// (a lock rolled back, whose rollback record is below start_ts), which
// would commit a transaction its caller was told had failed. A store
// that sends a call again on its own (over a server) answers a refusal
// of such a resend as storage.ErrUnavailable, an outcome unknown, never
// as a plain conflict. A refusal because the registry moved needs no
// such care: a copy that applied before it would have made it a
// conflict (the predicate is read before the registry), and a copy still
// to land is refused as it was (a version never moves back), so two
// phases may follow at the same start_ts. A crash
// after the write leaves a committed transaction with nothing to roll
// forward; a crash before it leaves nothing.
//
// The mutant one-phase-early-ts takes c from the oracle before its
// conditional write, with no mark: a transaction whose start_ts is above
// c may read the row before the write lands, miss it, and write the cell
// too (the predicate finds c below its start_ts); two compare-and-sets
// then both succeed from one value. verify's register workload catches it
// (TestVerifyMutants).
//
// # Async commit
//
// With Options.AsyncCommit, a transaction that writes two or more rows,
// at most AsyncMaxWrites cells whose rows and columns weigh at most
// AsyncMaxKeyBytes, commits without a commit point of its own (TiKV's
// async commit), where the store is owned by one process that runs the
// oracle (storage.AsyncPrewriter: the embedded store of a DB with its own
// oracle, a percolator server; as one-phase commit, and off on Bigtable
// for the same reason). async.go.
//
//  1. The prewrites of all its rows go in one call. Under every row's
//     latch, the store marks the rows' latch stripes as committing, reads
//     each row's predicate (a prewrite's, counting the transaction's own
//     lock too: no lock at all, no write record at or after start_ts, no
//     fence at or above it); if some row passes, it takes a timestamp m
//     from its process's oracle, checks the observer registry as a
//     one-phase commit does, and writes, in one durable batch, the locks
//     and data of every row that passed, each lock ending in m (its
//     min_commit_ts, stamped by the store into bytes the record keeps
//     for it); then it lowers the marks. Every lock says it is async; the
//     primary's names one cell of each other row (its secondaries).
//  2. Rows refused by a lock it resolves are sent again in a later call,
//     which stamps its own m. A row refused by a newer write fails the
//     transaction.
//  3. Once every row holds its lock the transaction is committed, at
//     commit_ts = the greatest m of its locks. Commit returns; the commit
//     records (all rows, the primary's too) are written in the
//     background, blind: anyone may roll a committed transaction forward.
//
// Deciding. The transaction is committed iff every row holds its lock or
// its commit record; rolled back iff some row holds its rollback record.
// No row ever moves back: a row's lock is written once (the predicate
// counts the transaction's own lock, so a copy of a call applies nothing
// once a lock, a commit record or a rollback record is there); a lock is
// removed only by rolling it forward or back, which happens only once the
// transaction is decided; and a rollback record is written at a row only
// while it holds nothing of the transaction (fenceCell's condition: no
// lock at start_ts, no write record at or after it). So the two states
// exclude each other, and a row seen holding its lock stays in. A
// resolver that meets an async lock (resolveAsync) reads the primary's
// status and, while the primary's lock stands, each secondary's: a
// commit record anywhere, committed at its timestamp; a rollback record
// anywhere (or another transaction's write record at or after start_ts,
// which keeps the row's prewrite out for good), rolled back; every row
// locked, committed at the greatest stamp, the same commit_ts its owner
// computed; a row holding nothing, undecided. Undecided, a writer (or
// the collector) waits while the owner may still write that row (coord
// liveness, the lock's TTL), and otherwise leaves a rollback record
// there (fenceCell), which decides the transaction rolled back: the row
// can never be locked now. The owner itself, giving up (a conflict, a
// call whose outcome it cannot learn), does the same at a row it does
// not know to be in, before it removes its locks; where that finds its
// own lock (a copy of a call landed), the row is in, and where every row
// is, the transaction committed and Commit says so.
//
// Snapshot isolation holds (invariant 2). A reader at start_ts T that
// reads a row of the transaction either finds its lock or not. Not: the
// read began after T was handed out; it waited for the row's mark, so any
// call that had taken its m had written its lock by then (the mark is
// raised before m is taken and lowered after the write returns), and a
// call that writes the row later takes its m after T was handed out:
// m > T, and so commit_ts > T, and the write is in no snapshot at T. The
// reader is right to read the row's older value. Found: the reader
// decides the transaction as above. Committed below T: the reader rolls
// the lock forward and reads the value. Committed at or above T: it reads
// past the lock. Undecided: some row held nothing when the reader read
// it, after T was handed out, so by the same argument the transaction
// commits above T if it ever commits; the reader reads past the lock
// without waiting, whether or not the owner lives, and writes nothing. So
// readers never wait on an async lock, and never push one (a push is a
// commit point's business; here every lock's m already is what a push
// would ask). Write conflicts (invariant 3) are a prewrite's: the
// predicate and the write are under the row's latch. commit_ts is above
// start_ts (each m was handed out after start_ts), and the oracle hands
// each m out once (invariant 1): no commit_ts is computed by the store,
// only taken from the oracle under the latch (the rows are not marked
// from a store-side max_ts, which can equal a timestamp the oracle hands
// out later: tikv/tikv#8349).
//
// Where an index answers a read without reading the store (the owner's
// index, and the server's lock index, presence), the read first waits
// for its row's mark (a scan: every mark), as the store's own reads do:
// the index learns of a lock only once its write returns, and a lock in
// flight may already carry an m below T.
//
// Registrations. Each call's registry check (after m is taken, under the
// latch) refuses a call built under a registry that moved: nothing is
// applied, and a commit whose first call was refused goes on in two
// phases under the new registry. A refusal of a later call fails the
// transaction (rolled back, a ConflictError), which Update retries. A
// registration's backfill, whose timestamp b is taken after the version
// moved, waits for the marks and notifies every cell with a lock, so a
// call with m < b is backfilled and one with m > b is refused.
//
// Durability. Each call is one synced write, so a returned Commit
// survives a power cut of the store, over a server too: the calls are not
// answered before their log sync, and need no epoch. The background
// commit records are deferred on the embedded store and nonce-free over
// a server; a lost one leaves its lock, which readers roll forward from
// the rows. A commit therefore waits for one round trip and one log sync
// (over a server: no commit-timestamp call, no commit point), against
// a two-phase commit's three round trips.
//
// Retries (invariant 6): a copy of a call after the first applied finds
// the locks and applies nothing; the owner reads a refused row, and a row
// holding its own async lock is in at the stamp it holds. A copy arriving
// after the locks were rolled forward finds the commit records (at or
// after start_ts), after a rollback the rollback records.
//
// Garbage collection: an async lock below the safe point is resolved in
// the locks-first phase as any other. A transaction whose commit_ts is at
// or below the safe point S had all its m handed out before S was
// sampled, so its locks were written before the phase's scan, which
// waits for the marks: the phase finds every lock still standing and
// rolls it forward before any commit record of the transaction is
// removed, as it does for a two-phase commit's secondaries.
//
// The mutant async-skip-secondary decides without reading the last
// secondary: a transaction whose last row's prewrite is still to come, or
// was refused, is taken for committed at the stamps of the others, and
// readers see half of a bank transfer. verify's bank workload with
// --async-commit catches it (TestVerifyMutants).
//
// The price: a resolver reads every row of the transaction (in one round
// trip where the store reads several rows at once), and a reader that
// meets a committed transaction's lock rolls it forward; hence the
// bounds, TiKV's. The heartbeat is not run: the locks stand only for the
// call and, past it, until the background records land.
//
// # Reads through locks
//
// A read at start_ts T that meets the lock of a live transaction X whose
// start_ts s is below T waits (invariant 2): X may still commit below T,
// and then its write is in T's snapshot. With Options.ReadThroughLocks it
// pushes X instead: it asks X to commit above T, at X's primary, and
// reads past the lock (push.go; resolveForRead in resolve.go).
//
//  1. The push is a CheckAndMutate on X's primary row: predicate, the
//     primary lock at exactly s; ifTrue, a cell of FamilyPush, qualifier
//     (primary column, s) as a beat's, at version T. It reports whether
//     it applied. On a store the client owns (the index) it writes
//     nothing: under the primary row's latch, where the index knows the
//     lock exactly, it raises the lock's push in the index to T if the
//     lock stands (cellIndex.push), and reports whether it did.
//  2. Applied: the reader reads past X's lock (Get, GetMany, Scan; a
//     cell's other locks are still resolved). Not applied: X's primary
//     lock is gone, X is decided, and the reader reads X's status again
//     and resolves as without the option (committed below T: roll
//     forward; rolled back: roll back), but for a commit above T: its
//     record is in no snapshot at T, so the reader reads past the lock
//     (a secondary's, not yet rolled forward) without writing. A reader
//     whose lock met is alive (its wall time and TTL, its owner) pushes
//     at once, without reading X's status first: only a push that
//     applies lets it read past, so the status read, needed when the
//     push does not apply, is one call saved when it does.
//  3. X's commit point applies only if its primary lock is at s and no
//     push of X is at or above its commit_ts c: a conditional write with
//     an unless filter (storage.Unlessed, storage.RowCheck.Unless over a
//     server; Bigtable: a condition filter whose true branch blocks
//     all; on a store the client owns, the index's push, read under the
//     same latch as the lock). Refused with the lock still there and such a push standing
//     (settleCommit reads both), X takes a new commit_ts from the oracle
//     and sends its commit point again, at most maxRepush times, then
//     rolls back its primary and fails with a ConflictError.
//  4. X's commit point and every rollback of its primary (the owner's
//     abort and settleCommit's, a resolver's rollBackPrimary) delete X's
//     pushes in the same write, with the lock. (The index drops a lock's
//     push when its apply hook removes the lock, under the same latch.)
//
// A reader that pushed misses no write of its snapshot. A push that
// applied was written while X's primary lock stood, so X had not
// committed (its commit point removes that lock in the same atomic
// write); every later commit point of X reads the push under the row's
// latch, together with the lock, and applies only at a c > T. So X
// commits above T or never, and its writes are in no snapshot at T: the
// reader is right to read past X's lock, in this cell and in every other
// it reads. A lock of another transaction in the cell is handled on its
// own (one lock at a time per cell: prewrites conflict on it). And the
// value it reads past the lock is the newest record below T in the same
// read: a transaction that commits below T wrote its locks before its
// commit_ts was handed out, so before T was, so before the read, which
// saw either its lock (resolved or pushed in turn) or its records.
//
// A commit that ignores a push is impossible. The push and the commit
// point are both conditional writes on the primary row, atomic with
// respect to each other: either the push applied first, and the commit
// point reads it (its unless) and applies only above T; or the commit
// point applied first, removing the lock, and the push applies nothing.
// The new commit_ts after a refusal is above every push standing: each
// push's T was handed out by the oracle before the push was written, the
// committer read the push after that, and asked the oracle only then
// (invariant 1). A push written after the committer's read is another
// refusal, a new timestamp, another try. The push must go to the primary:
// a push of a secondary's lock (mutant push-secondary) is never read by
// the commit point, which then commits below T, and a bank's reader sees
// half a transfer.
//
// Retries and late deliveries (invariant 6). A push is safe twice, late,
// in any order: once X is decided its primary lock is gone and a copy
// applies nothing; before that a copy asks again for what the first
// asked. A commit point refused by a push stays refused in every copy:
// pushes are removed only with the lock, so while a copy can find the
// lock it finds the push, and a late copy of a refused call can never
// apply; a copy of the later call at the new commit_ts applies once, and
// settleCommit accepts only a commit record at the commit_ts it sent
// last. A reader that pushed and then died (or timed out) leaves one
// push cell: X commits above it or not at all, and the push goes with
// X's lock.
//
// Which clients honour pushes. A client reads through locks only where
// its commit point honours pushes; on a shared store (a server, Bigtable,
// any store not Indexed) every client's commit point honours them whether
// or not it reads through locks itself, so clients with and without the
// option may share a store. A store one client owns (Indexed: the
// embedded store, one client per store) holds no push but its own
// client's, so there the commit point reads pushes only when the option
// is on, and costs nothing extra otherwise. Every backend is Unlessed,
// and every store wrapper forwards it (a wrapper that did not would make
// its client wait rather than push).
//
// The collector. A push below the safe point S is of a lock below S
// (pushes are above their lock's start_ts); a row's removal applies only
// when the row holds no lock below S, so that transaction is decided and
// its push asks nothing more of anyone: removed with the row's other
// garbage, under the same condition and fence ("What goes, per cell").
// While a lock stands its pushes stay (its lock below S keeps the
// collector out of the row; a lock at or above S has pushes above S), so
// a commit point's refusal never loses its reason.
//
// Why writers never push. A prewrite that meets another transaction's
// lock is a write-write conflict whichever commits first (invariant 3):
// pushing X past the writer's start_ts would not let the writer write
// the cell, which X's lock holds until X is decided. And the writer's
// conflict check asks for write records at or after its start_ts: a
// push does not change where X's record lands relative to it. So a
// prewrite resolves as without the option, and only reads, whose
// question ("what is below T?") a push answers, push.
//
// Durability. Over a server or Bigtable a push is a durable write: the
// server may restart under the pushed transaction's live client, which
// must then still find the push. On a store the client owns (the
// index: the embedded store) the push is kept in memory only, and on a
// store with one ordered log that it does not own (storage.Deferred) it
// is deferred, as a prewrite is. Either way a crash that loses it is a
// crash of the one process that runs the pushed transaction, which then
// never commits (its locks are rolled back once they expire); and a
// commit point of that transaction after the push read it, under the
// latch, and committed above T, its record durable with it. The
// reader's answer thus never rests on a push that a crash can take back
// while its transaction lives on. Keeping the push in memory takes it
// off the log: a push is a look at the index under the row latch, where
// a write behind the writers' batches in pebble's commit pipeline, its
// latch held all the while, made the pushing readers' p99 five to fifteen
// times longer (the readlocks figure, docs/benchmarks.md).
//
// The price: a commit point that is pushed past takes another oracle
// round trip and another conditional write, and the commit point of a
// store that honours pushes reads one more selector under the latch.
// What it buys: a reader no longer waits on a writer's commit, whose
// lock may stand for the writer's whole prewrite phase.
//
// # Read-only snapshots
//
// On a store one client owns (the index: the embedded store) a read-only
// transaction takes no fresh start timestamp. It starts at N+1, where N
// is the newest commit_ts that this client acknowledged (a Commit about
// to return nil, by any path: one phase, two, async) or that one of its
// reads returned (the commit record a Get, GetMany, Scan, ScanRows or
// CommitTS chose); N is raised before that Commit or read returns. N
// starts one below the first fresh start timestamp the client takes,
// above every commit acknowledged before the client was made (by an
// earlier process on the store, before a crash): until then, and where
// N+1 is below the safe point it knows, a read-only transaction takes a
// fresh timestamp (stable.go).
//
// It is a snapshot (invariant 2). Every argument in this file about a
// read at T rests on two facts about T: every timestamp below T was
// handed out before the read began, and every timestamp handed out after
// it began is at or above T. N+1 has both. N was handed out before the
// read began (its commit returned, or a read returned it), and so was
// every timestamp below it; the oracle hands out only timestamps above N
// afterwards (invariant 1). A fresh timestamp has the same two facts, and
// none of those arguments needs more: a lock below T was written before
// the read began (its start_ts was handed out before), a commit below T
// wrote its locks before its commit_ts was handed out, a one-phase commit
// below T was marked on its row before, an async lock's stamp taken after
// the read began is at or above T. N+1 itself may be handed out later, as
// another transaction's start_ts or commit_ts: a snapshot reads below T,
// so neither a lock nor a record at T is in it. A push at T asks for a
// commit above T; a committer's new timestamp after a refusal is above N,
// so at least T, and is refused once more at T itself.
//
// It keeps real-time order. A transaction begun after a Commit returned
// sees that commit: it raised N to its commit_ts first, so T is above it.
// One begun after a read returned a value sees that value's commit, or a
// newer one: the read raised N first. A commit that no one was told of
// yet (its Commit waits for its commit point's log sync, and no read
// returned it) may be at or above T: the snapshot misses it, as one begun
// a moment earlier would have, and does not wait for that sync, which a
// fresh snapshot above the commit must (Durability: a read never returns
// what a power loss could take back). That is what it is for: under a
// write load a fresh read-only snapshot waits for a commit point's sync
// on one read in a hundred or so, this one almost never (docs/
// benchmarks.md, the readlocks figure). A commit below T whose sync is
// still in flight (it reached its commit point before another that
// returned first) is waited for as by any read.
//
// One client per store, the index's premise, makes N cover every commit
// of the store acknowledged in this process, and its floor those
// acknowledged before. (Without the floor, a restarted process's reads
// raised N to the old commits they returned, and its read-only snapshots
// missed commits acknowledged before the restart: verify's bank under
// kills found it.)
// On a shared store or a server other processes acknowledge commits this
// client never hears of, so there read-only transactions take fresh
// timestamps (over a server, the server's, with the first read).
//
// The safe point. N+1 is at or above the safe point the client knew at
// Begin. A collector may have moved it above N+1 since (the client's copy
// is up to SafePointCache old): the first read then fails as too old
// (the check after every read), and the transaction takes a fresh start
// timestamp and reads again (fromStable). Nothing was read at the old
// snapshot, so no transaction sees two. From then on it holds the safe
// point back as any other (OldestActive).
//
// A read-only transaction's StartTS is therefore not unique: several may
// share one, and it may equal a later transaction's start_ts. StartTS
// called before the first read replaces the snapshot with a fresh one
// (restartFresh): the first read could still replace N+1, and a caller that asks
// (a backup records it) must be told the snapshot it reads.
//
// The mutant stable-unacked returns from Commit without raising N: a
// read-only snapshot begun after the commit returned may start below it
// and miss it. verify's register on the embedded store finds the history
// not linearizable, and TestMutantStableUnacked (txn, the mutants' tag)
// finds a writer's own read missing the commit it just made.
//
// # A nearly full disk
//
// A store low on space (storage.Reserver) refuses writes with
// storage.ErrNoSpace, but for those whose context storage.WithReserve
// marks. This package marks the writes that finish or undo a transaction
// whose locks are already written: a commit (the primary's, the rollback
// settleCommit makes when its outcome is in doubt, the secondaries'), an
// abort's rollback, and every write of a lock's resolution. So a
// transaction fails with ErrNoSpace at its prewrite, changing nothing,
// and one past its prewrites still commits: a refused commit point would
// leave its outcome unknown to its client (ErrCommitUnknown) and its
// locks in readers' way until resolved. The reserve pays for them: a few
// small records per transaction in flight. The collector marks its own
// writes too (they free space). Over a server the mark travels with the
// call (rpc.ReserveHeader).
//
// # Rejected designs
//
// Rollback records could be kept out of the write column (TiKV keeps them
// in it too); keeping them there makes "a prewrite at or after a rollback
// fails" a property of the same predicate that detects write conflicts. The
// price: a rollback record of another transaction newer than start_ts also
// aborts a prewrite. That is conservative and rare.
package txn
