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
//  1. Registrations are stored in FamilyObservers, with a registry version
//     (an 8-byte counter in the row versionRow), and loaded by New: every
//     process on the store learns of every registration. Register makes
//     the registration durable, then raises the version, then notifies
//     every cell of the column that already has a commit record or a lock
//     (the backfill). A committer builds its prewrites under one snapshot
//     of the registry, and between its last prewrite and its commit point
//     refreshes it (txn.Observers): if the version moved, it writes the
//     notifications the newer set asks for before committing. A
//     registration whose version was raised before that refresh is seen
//     by it; one raised after it backfills after the committer's locks
//     exist, and the backfill finds the lock or its commit record. So no
//     write is left unannounced, whichever process registered or wrote.
//     On a store this process owns (an exclusive store, whose one client
//     is this one) every registration passes through this registry, and
//     the refresh reads memory; on a shared store it reads the stored
//     version, and reloads the set when it moved. The commit timestamp
//     may bring that version instead (txn.VersionedOracle): a server, and
//     an elected oracle given the store, read it after allocating the
//     timestamp, so it is read after the last prewrite; a reply without a
//     version leaves the committer to read it itself.
//
//     A backfill records its progress (FamilyBackfill) after each chunk and
//     marks the registration done at its end (the registration's value
//     says "backfill" until then): one cut short by an error or a crash is
//     finished by the next Register of the observer or by Run, in any
//     process.
//
//     A scanner refreshes the registry after each scan of notifications
//     and before it clears any of them: a registration whose backfill
//     wrote a notification the scan returned has raised the version
//     before, so the scanner knows it, and never clears a notification
//     for an observer it has not loaded (it leaves the column to a process
//     with the observer's code, and a drain reports such observers). A
//     registration raised after the refresh writes notification versions
//     of its own, which a clear of the versions seen leaves. Columns that
//     no observer watches any more (Unregister) have their notifications
//     cleared by the same rule.
//
//  2. The notification is written by the prewrite, in the same atomic row
//     write as the lock (txn.SetObserved): it exists before the write can
//     be committed, by its writer or by anyone rolling it forward, and it
//     is durable whenever the commit is (one ordered log, or a synced
//     prewrite). A crash loses no notification of a committed write.
//
//     On a store whose families share rows (storage.SharedRows: Cloud
//     Bigtable, which has no locality groups, so a family filter still
//     reads every cell of the rows it passes) notifications live in rows
//     of their own (txn.NotifySpace owns the layout), so that
//     finding them reads only notifications. The prewrite cannot carry
//     them there: the committer writes them before its first prewrite,
//     marked as written ahead (txn.Notification.Ahead). A notification
//     ahead of its write is harmless — its run finds the cell clean — but
//     its clear must not let the write land afterwards, unannounced: the
//     clear (invariant 4) first fences off every such prewrite that has
//     not landed, with a rollback record at its start_ts on the data row,
//     written only where the column has no lock and no write record at or
//     after that start_ts (the condition that a landed or decided prewrite
//     breaks), then deletes the versions seen from the notify row
//     (txn.NotifySpace.Clear). A late
//     prewrite finds the record and fails; its writer retries with a new
//     start_ts and a new notification.
//
//  3. A cell is dirty for O while its newest commit_ts (txn.CommitTS, in
//     the run's snapshot, deletes included) exceeds O's ack. A run writes
//     the ack at its start_ts in its own transaction, so two runs of one
//     change conflict on the ack and at most one commits; if both abort,
//     the notification stays. A clean cell is not run. Many writes before
//     a run leave many notification versions and one run (collapsing).
//
//  4. Clearing deletes exactly the notification versions the scanner saw,
//     with a CheckAndMutate that applies only when the column has no lock
//     and no commit at or after the runs' start_ts: a newer notification is
//     its own version and stays, and a newer write keeps the old one too.
//     With notifications in their own rows the check (and the fences of
//     invariant 2) is a CheckAndMutate on the data row and the delete a
//     write to the notify row after it: a write that locks or commits in
//     between has a notification version that was not seen, which stays,
//     or was seen and is fenced.
//
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
// # Partitioned finding
//
// On a store shared by many worker processes (Bigtable), random scanning
// makes every worker visit the whole notify keyspace on every pass; on
// Bigtable, which has no locality groups, that is every cell of every
// row. With WorkerOptions.Membership the workers split the keyspace
// instead (as Apache Fluo does), by this rule:
//
//  1. Run registers the worker in its group (coord.Membership, under its
//     liveness) for as long as it runs, and watches the group.
//  2. Every member computes the same split from what every member can
//     read: the member list sorted by Owner, and a sample of the notify
//     keyspace's row keys (a scan of it, keeping the keys whose hash has
//     its top bits clear: the same keys give the same sample in every
//     process, whatever the order). The n-1 quantiles of the sample cut
//     the keyspace into n ranges; member i owns range i. An empty sample
//     keeps the bounds of the same member list, or cuts the 8-byte key
//     space evenly. It samples again on every member-list change and
//     every WorkerOptions.Resample (at the same wall-clock instants in
//     every process).
//  3. A scanner scans its worker's range from a random sampled key in
//     it, wrapping around within the range, and jumps (to another random
//     key in it) on contention, as before.
//  4. A scanner scans the whole keyspace from a random place, as a lone
//     worker does: while its worker knows no member list or is not in
//     it; for the first pass after the member list changed (the others
//     may still scan the old ranges); every FallbackEvery-th pass; and
//     after a pass over its range found nothing, in a drain, which ends
//     only when a pass over the whole keyspace found nothing.
//
// No state is shared beyond the membership: no split is stored, agreed
// or handed over, so there is nothing to lose or fence when a worker
// dies. Its liveness lapses, it leaves the group, the others compute the
// split of the smaller list and cover its range. The price is that two
// members may sample at different moments and compute slightly different
// bounds: an overlap costs a duplicate scan of a few rows (the advisory
// lock and the ack conflict keep the runs single); a gap leaves rows no
// range covers, which the passes of rule 4 find. Those passes also cover
// the time a member needs to learn of a change.
//
// What it saves: keys visited by passes. A worker that finds little
// passes at the pace of its back-off, and a pass over its range costs
// about 1/n of one over the whole keyspace; with three workers and
// FallbackEvery 8, about 0.42 (TestPartitionScanCost, on a store that
// counts keys as Bigtable does, measures 0.5 to 0.6 per change found,
// the fallback, the samples and contention included). Scanners that
// never idle visit keys at the store's pace either way; partitions then
// cut the time until a change is reached (a pass over a range), not the
// keys per change.
//
// Correctness does not depend on the partitions: they only choose where
// a scanner looks first and how often it looks elsewhere. Every
// invariant above holds for any choice of bounds (the ack conflict, not
// the ranges, keeps runs single), and a notification in no range is
// still found by the full passes, at worst a few passes later.
//
// Each worker publishes its range (FamilyPartitions, in the row
// partitionsRow: owner, bounds, view version, and when the entry expires:
// three re-sample periods on) at every re-sample, and withdraws it when it
// stops or finds itself no longer a member; Status shows the ranges of the
// members the newest unexpired entry lists, the notified rows in each
// (backlog), and the rows in none (Unowned). A worker that dies without
// withdrawing its entry (killed) drops out of Status when the entry
// expires, whether or not a live worker remains; live workers also delete
// such entries.
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
// Quarantine and re-queued by Retry. A conflict is not a failure. An error
// a later run would meet again — the dirty check or the commit failing on
// a corrupt record, a Commit or Rollback of the run's own transaction
// (which the framework ends: txn.ErrManaged) returned by the observer — is
// a failure too, so a drain always ends.
//
// An observer that writes the cell it observes makes a new change with
// each commit, and would run forever; a normalizing observer writes once
// more and then stops. Runs that write their own cell are counted
// (self_triggers in Status), and the selfTriggerLimit-th in a row on one
// cell is rolled back and its notification quarantined as a loop.
package observer
