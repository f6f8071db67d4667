// Package backup writes a database's committed cells, as of one snapshot,
// to a file, and restores such a file into an empty database: on any
// deployment (an embedded directory, a server, Bigtable with etcd), and
// from any to any, since the file holds cells, not a store's layout.
//
// # What a backup holds
//
// Every user cell (row, column, value) visible in the snapshot of one
// read-only transaction, and the observer registrations (name, column,
// kind) stored when the backup began. Not in it: the protocol's history
// (older versions, deletions, commit timestamps), the reserved rows and
// columns (the oracle's mark, the observers' acks), the notifications,
// quarantined notifications and observer counters, and the families other
// packages keep beside the transactions' (lock, queue and graph metadata,
// a user's own families written through DB.Store).
//
// # Consistency and the garbage collector
//
// Write holds one read-only transaction open from the first read to the
// last (DB.BeginReadOnly), and reads the whole keyspace through it in
// pages (Txn.ScanRows): the file is the snapshot at its start_ts, however
// long the backup takes and whatever commits meanwhile. An open
// transaction is what holds the garbage collector's safe point back
// (txn/doc.go, "Garbage collection": the embedded client's active set;
// what a server or etcd publishes). Should the safe point pass the
// snapshot anyway, the next page fails with ErrSnapshotTooOld (every read
// is judged after it returns), and so does Write: it never finishes a
// file whose snapshot may be torn. WriteFile writes a temporary file in
// the destination's directory and renames it into place only once it is
// complete and synced, so a failed backup leaves no file at all.
//
// # File format (version 1)
//
// All integers are big-endian; uvarint is encoding/binary's.
//
//	file    = header record* end trailer
//	header  = magic version start_ts time
//	magic   = "\x89PCB\r\n\x1a\n"       8 bytes (PNG's trick: 8-bit, line endings)
//	version = uint32                    FormatVersion
//	start_ts= uint64                    the snapshot's start timestamp
//	time    = int64                     when the backup began, Unix nanoseconds
//	record  = uvarint(n) body           n >= 1 bytes of body
//	body    = 0x01 str(name) str(column) flags    an observer; flags bit 0: weak
//	        | 0x02 str(row) str(column) value      a cell; value: the rest of the body
//	str     = uvarint(len) bytes
//	end     = 0x00                      (a record length of 0)
//	trailer = uint64(records) sha256    32 bytes: the SHA-256 of every byte before
//	                                    the trailer (header, records and end)
//
// The observers come first, then the cells in strictly increasing (row,
// column) order, bytewise: no cell twice. Nothing follows the trailer.
//
// Invariants a reader checks (Reader): the magic; a version it knows
// (else ErrVersion); each record's kind, lengths and order; the trailer's
// count and checksum; the end of the file after it. Any failure is a
// *CorruptError (errors.Is ErrCorrupt) naming the byte offset, and a file
// that ends early, anywhere, is one: only a complete file has a trailer.
// A reader allocates what the file holds, not what a length claims (a
// corrupt length cannot ask for gigabytes), and no record may exceed
// ReadOptions.MaxValueSize plus the largest row and column.
//
// # Restore
//
// Restore loads a file into a database that holds no user cell and no
// observer (else ErrNotEmpty, nothing changed), in two passes over the
// file, which must therefore be seekable (an *os.File) and must not
// change meanwhile:
//
//  1. Check: the whole file is read and verified (Reader), and every cell
//     and observer is checked against the database (percolator.ValidateCell,
//     the DB's MaxValueSize and transaction limits, Observer.Validate, no
//     name twice, no column of both kinds). Nothing is written; any
//     failure ends the restore here, the database as it was.
//  2. Load: the observers are registered without code (DB.Observe with
//     Fn nil), then the file is read again and its cells committed in
//     transactions of at most RestoreOptions.BatchCells cells and
//     BatchBytes bytes (never above the DB's MaxTxnWrites and
//     MaxTxnBytes), several at a time. The pass verifies the checksum
//     again and fails (ErrCorrupt) if it differs from the first pass's:
//     the file changed in between.
//
// A restore is not one transaction: a reader during the load sees part of
// the cells, and a load that fails (the file changed, the store failed,
// the restore was interrupted) leaves the cells it committed. Restore
// refuses such a store (ErrNotEmpty): restore into a fresh one again.
//
// Cells get the restoring database's timestamps: a restore keeps what the
// snapshot saw, never when it was written.
//
// # What a restored store processes again
//
// No ack and no notification travels in a backup, and the restored cells
// are new writes. The observers are registered before the cells are
// loaded, so each load transaction notifies the observed cells it writes,
// as any commit does. Once a process registers the observers' code
// (DB.Observe with Fn) and runs workers, every observer runs once on
// every restored cell of its column: every change pending at the
// snapshot is processed, and every change already processed is processed
// again, its observer rewriting what the backup already holds. An
// observer whose run is not idempotent (one that appends or counts) does
// its work twice for what it had processed before the backup.
package backup
