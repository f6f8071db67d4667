// Package queue is a set of named work queues kept in a storage.Store:
// at-least-once delivery under leases, with delivery counts and dead
// letters, on the store's compare-and-set and its clock (storage.Clock),
// so it runs on every backend with a clock (embedded, the single server,
// Bigtable).
//
// # Why CAS, leases and a time-ordered index, not the bakery
//
// The sketch (seeds/002) builds its queue from Lamport's bakery over
// quorum reads and writes: workers announce they are choosing, take
// numbers, and wait for every lower number. That needs no compare-and-set
// from the store, only quorum reads and writes, but every worker must read
// every other worker's cells, and a worker that stops stops everyone. A
// store with a single-row compare-and-set (every backend here) makes
// mutual exclusion one conditional write: a worker claims an item by
// CheckAndMutate on the item's state, and exactly one claim of a state
// applies. What this package needs from the store: single-row
// CheckAndMutate, ordered scans, and a clock (storage.Clock). What it
// guarantees: every pushed item is delivered until acked (at least once);
// an item is delivered again only after its lease expired by the store's
// clock or it was nacked; a worker whose lease expired can neither ack
// nor extend a redelivered item.
//
// The sketch's three open problems, answered:
//
//  1. A client that crashes while choosing or holding blocks everyone:
//     nothing here waits for another worker. A claim is one conditional
//     write; a worker that dies holding an item holds a lease, which
//     expires by the store's clock, and the item is delivered again.
//  2. Idle workers contend and rescan: the index is ordered by the time
//     an item becomes available (pushed, or its lease's expiry), so items
//     under lease are not in the range a look reads; each process keeps a
//     cursor and a look reads only the entries that became due since its
//     last one; a shared cursor, persisted in the store, lets a new worker
//     start where the others are instead of at the first item ever pushed.
//     Idle workers back off with jitter. Metrics.KeysVisited counts what
//     looks cost, deleted entries (tombstones) included.
//  3. Leases, not locks: Pop returns a Delivery under a lease of a given
//     TTL; the worker acts while Valid (its send time + TTL × (1 − ρ) by
//     its own monotonic clock), then Acks, Nacks or Extends it, each a
//     CheckAndMutate on the lease's state, so a stale worker cannot take
//     back an item delivered again. After MaxDeliveries deliveries an item
//     moves to the dead letters, to be listed (Dead) and requeued.
//
// # Invariants
//
//  1. Rows (family "queue"), under "queue/NAME\x00": an item row "i"+ID
//     (body, state), index entries "v"+at+ID+req, dead-letter marks
//     "d"+ID, and the shared cursor "c". IDs are the push's store time
//     and random digits, so items of one push time sort by push.
//  2. An item's state is one cell whose version is its epoch: every
//     change writes the next version by CheckAndMutate on the current
//     one (deleting the older ones), so a version names one content, and
//     a call conditioned on the epoch it read is conditioned on all of it
//     (lease, expiry, count).
//  3. Every state but dead has its index entry: at its time (ready: when
//     it may be delivered; leased: the lease's expiry; acked: the end of
//     its retention), named by the request that wrote the state. A change
//     places the new state's entry first, then writes the state, then
//     deletes the old entry; a push places its entry, then creates the
//     item (only if its row has no state). So a crash leaves at most an
//     entry too many, never an item without its entry. An entry whose
//     item moved on (or is gone) is stale and deleted by whoever finds
//     it. One written for a change not applied yet (pending) is left
//     alone until it is older than twice Grace; then it is fenced off:
//     the item's state is rewritten as it is at the next epoch, under a
//     new request with a fresh entry (a leased item keeps its lease and
//     expiry), or, for a push whose item is not there, a void state takes
//     its place (removed after Retention). The pending change, conditioned
//     on the old epoch (or on the row having no state), can then never
//     apply, and the entry is stale. Rejected: deleting a pending entry
//     after twice Grace without a fence; a change still on its way (a
//     store slower than that) then landed with no entry, and an item
//     stayed counted by Stats and delivered by no Pop.
//  4. Time is the store's: entries and leases are stamped from bounds on
//     the store's clock (a reading plus this process's monotonic time
//     since, widened by ρ), expiry judged by the low bound (never early)
//     and stamped from the high one. Client wall clocks are never used.
//     A delivery's deadline (Valid) is the first send of the call that
//     made its lease (the Pop's look, or the Extend) + TTL × (1 − ρ): the
//     expiry is stamped from a reading taken after that send, and moves
//     only later when an entry is placed again (5).
//  5. An entry lands within Grace of the clock reading its time came
//     from, or before its own time + Grace: its writer checks when the
//     write returns, and deletes and places again one that landed later,
//     from a fresh reading. The shared cursor stays twice Grace behind
//     the store's time and never passes an entry it cannot resolve
//     (stale ones it deletes, pending ones it fences off first), so no
//     current entry is ever behind it, and an entry written behind a
//     process's own cursor is found by the next catch-up. Rejected:
//     checking after the state change (and moving a late item to a fresh
//     entry); a writer that crashed right after its late change left the
//     item behind the cursor.
//  6. Every store call is safe to send again after an unknown outcome,
//     and a late copy of it (a slow network; Bigtable and the embedded
//     stores have no nonces) changes nothing it should not, on every
//     backend: a push's item write is conditioned on its row having no
//     state, and the state read after it tells whose it is; a state
//     change is conditioned on its epoch, carries its request's id in the
//     state it writes, and whenever its reply does not say it applied (a
//     re-send whose first copy applied sees its predicate fail) the state
//     is read to tell; an entry's key names one state, so its write and
//     deletion are idempotent and a late write only brings back a stale
//     entry; the removal of an acked item is conditioned on its epoch; a
//     dead-letter mark is written at the dead state's epoch and a
//     Requeue deletes only the marks up to its own, so a late deletion
//     cannot remove a later dead-lettering's; the shared cursor moves by
//     CheckAndMutate on its version. An outcome that stays unknown after 8
//     sends is an error wrapping ErrUnknown.
//  7. Ack, Nack and Extend are conditioned on the delivery's lease, not
//     on one epoch: when the item has moved to another epoch while still
//     leased under the same lease (an Extend whose reply was lost, a
//     fence), they apply there. Acking twice, or nacking twice, under one
//     lease succeeds while no one took the item since.
//  8. A push is queued once: Push recognises its own earlier sends; when
//     it cannot learn whether its item was written it returns the item's
//     ID with ErrUnknown, and PushAgain with that ID writes the item only
//     if it is not there (or was fenced off: then under a new ID). An
//     acked item keeps its state for Retention: a PushAgain later than
//     that pushes it again.
//
// testdata/leases walks a queue through its lifecycle one call at a
// time, with its index entries at each step: push, pop, extend, ack,
// expiry and redelivery, nack with a delay, the dead letters, requeue.
package queue
