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
//     one, so a version names one content, and a call conditioned on the
//     epoch it read is conditioned on all of it (lease, expiry, count).
//  3. Every state but dead has its index entry: at its time (ready: when
//     it may be delivered; leased: the lease's expiry; acked: the end of
//     its retention), named by the request that wrote the state. A change
//     writes the new state's entry first, then the state, then deletes
//     the old entry, so a crash leaves at most an entry too many; an
//     entry whose item moved on is stale and deleted by whoever finds it;
//     one written for a change not yet applied (pending) is left alone
//     until it is older than twice Grace.
//  4. Time is the store's: entries and leases are stamped from bounds on
//     the store's clock (a reading plus this process's monotonic time
//     since, widened by ρ), expiry judged by the low bound (never early)
//     and stamped from the high one. Client wall clocks are never used.
//  5. An entry is written at most Grace after the clock reading its time
//     came from, or its writer moves the item to a fresh entry (settle).
//     The shared cursor stays twice Grace behind the store's time and
//     never passes an entry it cannot resolve, so an entry written behind
//     a process's own cursor is found by the next catch-up.
//  6. Every call is safe to re-send after an unknown outcome, on every
//     backend (Bigtable has no nonces): a push is written only if its item
//     row is absent (and an acked item keeps a mark for Retention); a
//     state change carries its request's id in the state it writes, so a
//     re-sent one recognises its own earlier success; index writes and
//     deletes are idempotent.
package queue
