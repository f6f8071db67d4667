// Package workload holds the checked workloads: programs that load a
// database the way users do, and the checks of what it must keep.
// The command line (percolator bank), the benchmarks (package bench) and
// the tests drive the same code, so a figure, a soak and a check after a
// crash all mean the same workload.
//
// # Bank
//
// The bank of the seeds: Accounts accounts opened with Initial each;
// Workers move random amounts between random pairs of accounts, each
// transfer one transaction reading both balances and writing both back,
// while Readers audit: each audit sums every balance in one read-only
// snapshot. Snapshot isolation holds exactly when every audit finds
// Accounts accounts summing to Accounts × Initial.
//
// The caller's contract:
//
//  1. RunBank opens the accounts on first use of a store, in one
//     transaction, and refuses a store whose bank has another number of
//     accounts (ErrAccounts). The rows it writes are "acct/NNNNNN"
//     (column "bal"), "bank/meta" and, with Record, one "xfer/..." row per
//     transfer (column "amount").
//  2. RunBank runs for Duration or until ctx ends. A transfer that fails
//     (a conflict, most often) counts as a failure and the worker goes on;
//     one that fails with percolator.ErrUnavailable (a server or
//     Bigtable gone past its retry budget) ends the run with that error.
//  3. With Record, OnCommit is given each transfer's row once its
//     transaction committed: after a crash of any process, every row it
//     was given must be there (CheckTransfers).
//  4. AuditBank sums the balances in one snapshot; BankAudit.Check says
//     whether the sum is the one snapshot isolation implies
//     (ErrWrongTotal). A run counts each wrong audit in its result.
//
// Every callback of the bank is called with no other call of the same
// callback in progress, from the workload's goroutines.
//
// # Dependency graph
//
// A package dependency graph (testdata/debian-deps.tsv.gz) loaded into a
// label of package graph, as percolator graph load does: ReadDeps reads
// the file, LoadDeps inserts its edges with concurrent workers into the
// label DepsLabel defines (created unless it exists; ErrConsistency when
// it exists with another consistency than required), after which
// graph's Check verifies every index and degree.
package workload
