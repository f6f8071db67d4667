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
//   - what an error says to the user (Message): the command's name once,
//     none of the internal packages' prefixes, no part twice, advice that
//     names flags rather than the Go API's fields; an error told in the
//     command line's words that errors.Is still matches (Rephrase); a
//     flag value that does not parse, named with what the flag takes
//     (FlagError);
//   - the argument checks, the usage text and the one-dash long flags
//     the commands were first written with (WithTwoDashes).
//
// Nothing here prints a command's results: package view does.
package cli
