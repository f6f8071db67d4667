// Package percolator is a Go implementation of Google's Percolator:
// cross-row snapshot-isolation transactions over a Bigtable-model store
// whose only atomic primitive is a single-row conditional mutation, and
// observers — code that runs, in its own transaction, when a column
// changes (incremental processing).
//
// # Opening a database
//
//	db, err := percolator.Open(ctx, percolator.Options{Dir: dir}) // Dir "" = in-memory
//	defer db.Close()
//
// The embedded deployment (the default) keeps the store in Pebble under
// Dir/store, with the timestamp oracle's high-water mark and lease inside
// it. One DB opens a store at a time: a second Open of the directory, in
// this process or another, fails with ErrInUse naming the holder. The next
// DB to open it resolves the locks a crashed one left at once. Options.Store
// runs on another storage.Store; DBs that share a store with other
// processes must share one Options.Oracle (and should be given a
// Options.Liveness: without one, their locks are judged by their TTL).
//
// # Transactions
//
//	err = db.Update(ctx, func(tx *percolator.Txn) error {
//		v, err := tx.Get(ctx, "Bob", "bal") // ErrNotFound if absent
//		...
//		return tx.Set("Bob", "bal", newValue) // buffered until commit
//	})
//
// Update retries write conflicts with jittered back-off until it commits
// or its context ends; View runs a read-only snapshot; Begin hands out a
// transaction to drive by hand (Commit, Rollback). A transaction reads the
// snapshot at its start timestamp: every transaction that committed before
// it began and nothing after, plus its own writes. Of two concurrent
// transactions that write one cell, at most one commits. Two that each
// read a cell the other writes may both commit (write skew); GetForUpdate
// reads a cell and locks it at Commit as a write would, without changing
// it, so they conflict instead. A Commit that returned nil is durable; one
// whose outcome could not be learned returns ErrCommitUnknown, never
// success or failure.
//
// # Observers
//
//	err = db.Observe(ctx, percolator.Observer{Name: "upper", Column: "text", Fn: upper})
//	report, err := db.RunWorkers(ctx, percolator.WorkerOptions{Scanners: 4, Drain: true})
//
// Every write of an observed column sets a notification in the same atomic
// row write as its lock; scanners find notifications (reading only the
// notify keyspace) and run the column's observers, each in its own
// transaction. At most one run commits per change; changes before a run
// collapse into one; an observer that keeps failing has its notification
// quarantined (Options.MaxFailures). Registrations are stored: every
// process on the store notifies every registered observer's column.
//
// # Errors
//
// Every error is testable with errors.Is against this package's sentinels
// (ErrConflict, ErrNotFound, ErrInvalidArgument, ErrTxnFinished,
// ErrReadOnly, ErrTxnTooLarge, ErrManaged, ErrCommitUnknown, ErrInUse,
// ErrClosed, ErrStoreFailed, ErrFormat) and says "percolator: ..."; errors.As finds a
// *ConflictError with the cell and reason of a conflict. Bad input writes
// nothing.
//
// # Architecture
//
// A contributor's map. The packages form layers, and imports go down
// only (a test, TestLayers, fails when one goes up):
//
//	cmd/percolator              the command line: parse flags, call a package, print
//	bench, verify               the performance figures; checked histories under faults
//	docindex, workload, backup  the index job; checked workloads (bank, list-append, ...); backups
//	cluster                     wiring of the distributed deployment (Bigtable + etcd)
//	graph, lock, queue          S2Graph's edges; leased locks; work queues
//	percolator (this package)   the public facade: Open, DB, Txn, observers, Options
//	server                      the gRPC services of percolator serve
//	observer                    registrations, scanners, runs, acks, quarantine
//	txn                         the Percolator protocol: prewrite, commit, resolve
//	oracle (+ remote, etcd)     timestamps: allocator, batching client, election
//	coord (+ remote, etcd)      liveness, advisory locks, membership
//	storage backends            storage/memory, pebble, bigtable, remote; shared
//	rpc                         gRPC plumbing shared by clients and server
//	storage, history            the Bigtable-model interface; histories and their checkers
//
// Below every layer: internal/mutant (the deliberate protocol bugs of
// builds tagged percolator_mutants, which verify's tests must catch; a
// constant false otherwise), internal/faultproxy (the fault proxy of
// the tests and of verify's nemesis), internal/loopback (the ports
// picked for processes handed an address to listen on: etcd members,
// verify's services) and internal/proccpu (the process's CPU time, for
// the figures that report CPU per operation).
//
// Two departures from the design's list: bench and verify sit above
// docindex and workload, whose jobs they measure and check; and rpc sits between the
// storage interface and its backends, since it maps gRPC errors to
// storage's (storage.ErrUnavailable) and storage/remote is built on it.
// Within a row a package may build on its own family (oracle/etcd on
// oracle/remote, the command on its internal packages). Packages that
// exist for tests (storagetest, etcdtest, servertest, ...)
// are imported by tests alone, so no binary links them.
//
// Each format has one owner, which encodes and decodes it; the others
// call it. txn owns the protocol's cells (data, lock, write and beat
// records, the notify keyspace: txn.NotifySpace) and their rendering for
// humans (txn.FormatCell); observer owns the registry, acks, quarantine
// and partition records; oracle the high-water mark and lease; server
// its sessions and nonce records; lock, queue and graph their own
// families; backup the backup file. The system's rows live in a reserved namespace
// (storage.ReservedPrefix) that clients cannot write.
//
// Where to read next: package txn's doc for the protocol's invariants
// and storage layout, observer's for notifications, storage's for the
// store contract and its optional capabilities, oracle's for timestamps,
// server's for the single-server deployment, cluster's for the
// distributed one.
package percolator
