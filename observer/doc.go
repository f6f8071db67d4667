// Package observer is Percolator's other half: code registered on a
// column runs, in its own transaction, after the column is written
// (incremental processing), found by scanners that read only the notify
// keyspace.
//
// # Layout
//
// For a user column c of row r (txn's families): the notification versions
// live in FamilyNotify (qualifier c), each at the start_ts of the write it
// announces; observer O's ack is the reserved column AckColumn(O, c),
// holding the start_ts of O's last committed run. Registrations live in
// FamilyObservers, quarantined notifications in FamilyQuarantine and
// counters in FamilyStats: each family is its own keyspace.
//
// # Invariants (DESIGN.md, "Observer invariants")
//
//  1. Registrations are stored (Register writes FamilyObservers before it
//     returns) and loaded by New, so every process that opens the store
//     sets notifications for every observed column. Register installs the
//     new set in the txn client, which returns only after every prewrite
//     built with the old set has finished, then notifies every cell of the
//     column that already has a commit record or a lock (the backfill): no
//     write is left unannounced.
//  2. The notification is written by the prewrite, in the same atomic row
//     write as the lock (txn.SetObserved): it exists before the write can
//     be committed, by its writer or by anyone rolling it forward, and it
//     is durable whenever the commit is (one ordered log, or a synced
//     prewrite). A crash loses no notification of a committed write.
//  3. A cell is dirty for O while its newest commit_ts (txn.CommitTS, in
//     the run's snapshot, deletes included) exceeds O's ack. A run writes
//     the ack at its start_ts in its own transaction, so two runs of one
//     change conflict on the ack and at most one commits; if both abort,
//     the notification stays. A clean cell is not run. Many writes before
//     a run leave many notification versions and one run (collapsing).
//  4. Clearing deletes exactly the notification versions the scanner saw,
//     with a CheckAndMutate that applies only when the column has no lock
//     and no commit at or after the runs' start_ts: a newer notification is
//     its own version and stays, and a newer write keeps the old one too.
//  5. Weak notifications (Notify) write only the notify column of a column
//     whose observers are weak: no ack, no conflict, a run per pass.
//
// # Finding work
//
// Each scanner starts at a random row, scans the notify keyspace to its
// end and around, takes a coord.Locker advisory lock on each row before
// running its observers, and jumps to a new random row when it finds a row
// held by another scanner (the paper's fix for scanners bunching up like
// buses). A pass that finds nothing backs off, doubling up to MaxIdle.
// The advisory lock is only an optimization: correctness rests on the ack.
//
// Finding costs keys visited in the notify keyspace, and a cleared
// notification on an LSM store is a tombstone that scans still visit: left
// alone, every notification ever cleared would be rescanned by every pass
// forever. So a scanner compacts the notify keyspace (storage.Compacter)
// at the end of a pass once WorkerOptions.CompactAfter notifications were
// cleared since the last compaction; on Pebble that rewrites the notify
// family's own sstables only. Finding dirty cells then visits keys in
// proportion to the dirty cells (plus at most a few times CompactAfter),
// not to the table. Scanners count what they visit (storage.Counted) in
// the counters Status reports.
//
// A clear is written without waiting for its sync (storage.Deferred): lost
// in a crash, it leaves a notification whose run finds the cell clean,
// since the ack it follows is durable, and clears it again. A clear after
// a quarantine waits for its sync, so that a crash cannot leave a
// notification both pending and listed as quarantined.
//
// # Failures
//
// An observer that returns an error or panics is rolled back and retried
// after a back-off that doubles per failure; after Options.MaxFailures
// failures in a row on one cell its notification is quarantined (a
// FamilyQuarantine record) instead of spinning forever, listed by
// Quarantine and re-queued by Retry. A conflict is not a failure.
package observer
