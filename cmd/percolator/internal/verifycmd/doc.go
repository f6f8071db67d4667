// Package verifycmd is the `percolator verify` command: it parses the
// flags, calls package verify and prints the verdict; its hidden
// subcommands are the processes a run starts (client, worker, service).
//
// Invariants:
//
//   - Bad options are a usage error (exit 2) and start nothing: no
//     process, no directory, no row.
//   - A forbidden anomaly is exit 1 (cli.ErrFailed), with the report's
//     directory named.
//   - --cleanup and a run on an existing deployment remove only what is
//     under verify.RowPrefix and the observers of its runs.
package verifycmd
