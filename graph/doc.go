// Package graph is a property graph on the storage.Store interface —
// S2Graph's edge model and its edge mutation protocol (seeds/000) — so it
// runs on every deployment: embedded, the single server, and Bigtable.
//
// # Model and layout
//
// A label (stored, so every process sees it) declares its properties'
// types, its indices (each an ordered list of properties) and its
// consistency. An edge is (src, label, tgt) with a version (the caller's
// timestamp) and properties. Every cell is in Family, under rows "graph/…":
//
//   - the snapshot edge, one row per (label, src, tgt): one cell whose
//     version (the cell timestamp) rises by one with every write of it,
//     holding the edge's state (each property with the version that set
//     it, the newest insert and delete), the pending mutations of its lock
//     and lockedAt, and the IDs of recently settled mutations;
//   - index edges, per index and direction (out-edges under the source,
//     in-edges under the target): one row per edge, keyed by the index's
//     property values in order-preserving encodings and then the other
//     vertex, so a query reads one contiguous range, in index order;
//   - degrees, per (label, direction, vertex): a count and one presence
//     cell per edge.
//
// # Strong consistency (S2Graph's protocol)
//
//  1. Trying: fetch the snapshot edge. A live lock (pending mutations,
//     lockedAt younger than Options.LockExpiry = MaxBackOff × MaxRetries)
//     makes the mutation back off with jitter and fetch again. A request
//     older than the snapshot's version is dropped (Result.Dropped).
//  2. Trying → Locked: compare-and-set the snapshot from the version
//     fetched to the next, adding the request as pending with lockedAt.
//     Only one contender wins; the others fetch again. An expired lock is
//     taken over the same way: its pending mutations stay queued before
//     the new one, and are rolled forward first (by the new holder, or by
//     any reader: Repair, Check).
//  3. Locked → Updated: for each pending mutation, its EdgeMutate (old
//     index edges deleted, new ones inserted, degrees flipped) is built
//     once, from the state before it, and fired; a failed call is re-sent
//     as it was, never rebuilt.
//  4. Updated → Done: compare-and-set the snapshot to the merged state,
//     without pending or lockedAt. Properties merge one by one, the newer
//     version winning.
//
// strong.go has a function per state (try, with its verdict; update;
// release); testdata/strong walks them one step at a time on the seed's
// rating, with a crashed holder taken over and lost replies.
//
// # Invariants
//
//  1. Every write is safe to send twice or late. The snapshot's CAS only
//     applies from the version read, and a mutation recognises its own
//     lock and its own settled ID, so a lost reply is found by fetching.
//     An index-edge write carries its mutation's version (the snapshot
//     version of its lock, which only rises) and is a CheckAndMutate that
//     applies only if the row holds no cell of a newer version: a present
//     cell, or the marker a delete leaves. This matters because a holder
//     whose lock was taken over may still be sending: its delayed "insert
//     index edge rating=3" can land after the new holder deleted that row.
//     S2Graph relies on HBase's delete markers, which mask older puts;
//     DeleteCells removes only what is present, so the marker is explicit
//     here.
//  2. A degree changes only in the same single-row CheckAndMutate that
//     flips the edge's presence cell to a newer version, conditional on
//     neither the presence cell nor the count having changed since read.
//     A plain Increment (or a per-mutation cell folded into a total) would
//     count a duplicate twice; a flip already applied, or overtaken by a
//     newer one, changes nothing.
//  3. A query (one scan of index rows with a present cell) never returns
//     an edge whose deletion is Done: the delete's index writes all
//     succeed before the release.
//  4. Locks are judged by the wall clocks of the processes: a lock
//     stamped by a process whose clock runs slow looks expired early. The
//     protocol stays safe under that (a takeover's writes carry higher
//     versions; the old holder's late writes are refused by invariants 1
//     and 2, and its release CAS fails); only the mutual exclusion that
//     saves work is lost.
//
// # Weak consistency
//
// A weak label's mutation fetches the snapshot and writes the new
// snapshot and the index edges in one batch (MutateRows), then the degree
// (Increment), without a lock, as S2Graph does. What can go wrong
// (TestWeakGoesWrong shows each): two writers that fetched the same
// snapshot both delete the old index edge and insert their own, so an
// index keeps an edge the snapshot no longer has; the later snapshot write
// silently wins over the other's merge; and the degree is a plain
// Increment, counted twice when the caller sends it twice, and not at all
// when the batch applied but the call failed before the Increment (the
// mutation re-sent then changes no liveness, so moves no degree).
//
// What cannot go wrong: a late copy of a batch never erases an
// acknowledged write (DESIGN invariant 10; Bigtable's client re-sends a
// failed MutateRows without a nonce, and the batch goes without one over
// a server too). The snapshot is put at its own version, so a late copy
// adds an older version under the newest; an index write removes only
// versions up to its own, and a delete leaves a marker at its version
// (qualGone), as strong labels' do. Queries and Check of a weak label read
// the newest edge and marker of each index row, and count the edge only
// when it is the newer (TestWeakLateDeleteKeepsReinsert). So, with one
// writer per edge at a time, the index edges match the snapshots whatever
// the faults (TestWeakLossyHistory); only the degree may be off.
//
// # Txn consistency
//
// A label of consistency "txn" runs every operation as one percolator
// transaction on Options.DB: the snapshot (its state, no lock), the index
// edges (column "e") and the degrees (column "n") of a mutation commit
// together, retried whole on conflict; queries and Check read one
// snapshot, so nothing is ever in flight. The same rows as the other
// labels, in the transactions' own families.

package graph
