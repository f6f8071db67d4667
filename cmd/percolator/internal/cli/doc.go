// Package cli holds the parts that percolator's commands share, so that
// each command file only parses its flags, calls a package and prints:
//
//   - the target flags (--dir, --server, --bigtable/--etcd and their
//     companions), defined once, checked, and opened (Target);
//   - the flags of the long-running commands: where and how to serve
//     gRPC (ListenFlags) and how to log (LogFlags);
//   - the exit statuses: a usage error (UsageError, Usagef: exit 2), a
//     failed check (ErrFailed: 1), a clean stop on a signal (ErrDrained:
//     0), a command's own status passed on (ExitCode), a signal
//     (Interrupted: 128+signal), mapped by ExitStatus, which also prints
//     the error as "percolator <command>: <what happened>";
//   - the argument checks, the usage text and the one-dash long flags
//     the commands were first written with (WithTwoDashes).
//
// Nothing here prints a command's results: package view does.
package cli
