// Package bench measures percolator's performance figures, each beside
// its reference in the same run, on the same disk or server, and judges
// each against its target: percolator bench runs them and prints what
// they report.
//
// Three suites, chosen by the options (Options.Suite):
//
//   - Embedded (the default): the oracle, writes and reads against raw
//     Pebble, the bank, the latency of reads that wait for the bank's
//     locks against reads that push them (readlocks), the bank beside
//     badger, bbolt and etcd's STM (rivals.go), finding notifications,
//     the index's observers and
//     reruns, the graph's labels, leased locks and work queues, each in
//     stores of its own under Options.Dir;
//   - Server (Options.Server): a percolator server's oracle, reads, writes
//     and nonces, each beside raw RPCs to the same server; and, given
//     Options.Postgres, the server against PostgreSQL on the same bank
//     (postgres.go), the two run in alternating turns;
//   - Bigtable (Options.Bigtable or BigtableEmulator): the Bigtable calls
//     per transaction, reads and writes beside raw Bigtable calls, and the
//     cost of finding notifications.
//
// Each suite also has the gc figure (gc.go): the space a store holds with
// the garbage collector running against one without, the bank's
// throughput with it against without, and a scan after a collection
// against a scan of a fresh store. It needs stores whose collector it
// sets and whose cells it reads, so it makes its own: Pebble stores under
// Dir, servers it starts in process there (not Options.Server), or
// Bigtable emulators in process (for a real table too: each measurement
// needs empty tables, and bench deletes no table).
//
// The caller's contract:
//
//  1. Dir is a scratch directory the figures fill (PrepareDir makes one,
//     and never empties a directory it did not make).
//  2. Run runs the named figures one at a time, in the suite's order, and
//     hands each one's Report (its lines, its targets met or missed) to
//     the caller as it ends, a failed one's too.
//  3. Two figures run this program in processes of their own, as a user
//     does (Options.Command): rerun times `index`, the server's oracle
//     figure spreads its callers over `bench-client` processes, whose work
//     is RunClient.
//  4. No figure asserts a time: a target missed is a figure, not an error.
//     A figure fails (ErrCheck) only when what it measured is wrong: a
//     bank snapshot off, an index that differs from its batch build.
//  5. A target's verdict is computed from the value as its line prints
//     it, rounded: a printed value that satisfies the printed target is
//     met ("0.25x" against ">= 0.25x"), one that does not is missed.
package bench
