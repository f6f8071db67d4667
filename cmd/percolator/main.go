// Command percolator runs the Percolator implementation's workloads and
// tools on an embedded database directory (--dir D), a server's database
// (--server ADDR) or Bigtable with etcd (--bigtable P/I/T --etcd E), and
// runs the server, the elected oracle and extra workers. It is a command
// line only: each command (one per file, on github.com/spf13/cobra)
// parses its flags, calls a package and prints. The index job is
// docindex.RunJob, the bank workload.RunBank, the figures package bench;
// serve runs server.ServeUntil, oracle cluster.ServeOracle, devcluster
// cluster.StartDev, queue consume queue.Consume. What the commands share
// is in internal/cli (the target flags, exit statuses, usage) and
// internal/view (what they print).
//
//	percolator index --dir D | --server ADDR [flags] SRC_DIR
//	percolator index --dir D | --server ADDR query WORD
//	percolator index --dir D | --server ADDR --dups
//	percolator status --dir D | --server ADDR
//	percolator notifications --dir D | --server ADDR [--quarantined] [--retry]
//	percolator bank  --dir D | --server ADDR [--accounts N --workers W --duration T]
//	percolator dump  --dir D | --server ADDR [--prefix P]
//	percolator locks --dir D | --server ADDR [--resolve]
//	percolator backup --dir D | --server ADDR --out FILE [--force]
//	percolator restore --dir D | --server ADDR FILE
//	percolator serve --dir D [--listen 127.0.0.1:7420] [--http ADDR] [--token-file F] [--tls-cert C --tls-key K]
//	percolator worker --server ADDR [--scanners N] [--http 127.0.0.1:PORT]
//	percolator oracle --etcd ENDPOINTS --bigtable PROJECT/INSTANCE/TABLE [--listen 127.0.0.1:7430] [--etcd-prefix P] [--lease 3s] [--token-file F] [--http ADDR]
//	percolator bench [--dir D | --server ADDR] [--only FIGURE]
//	percolator init --bigtable PROJECT/INSTANCE/TABLE
//	percolator lock acquire|release|show NAME [-- COMMAND]
//	percolator queue push|consume|stats|dead NAME
//	percolator graph load|insert|delete|query|degree|check
//	percolator devcluster --dir D
//	percolator completion bash|zsh|fish
//	percolator version | --version | help [COMMAND]
//
// index's only sub-command is query: a source directory named query is
// given as ./query, or after "--", after which every argument is a
// directory (percolator index --dir D -- query). Long flags take one dash
// or two (-dir or --dir), as the flag package the commands were first
// written with took them.
//
// With --server, --token-file F (or $PERCOLATOR_TOKEN) gives the token and
// --tls-ca the CA of a TLS server. A server that does not answer (down,
// restarting, unreachable) is retried for --retry-budget (default 30s) per
// operation (a transaction, a read, opening; a worker's whole run); then
// the command fails, naming the server.
//
// --json makes a command that prints a list, a status or a summary print
// it as JSON, by one convention (snake_case keys, durations in seconds
// as *_s, RFC 3339 times, user bytes as x and x_b64); docs/json.md states
// it and each command's schema, which TestJSONMatchesDocs checks.
//
// --lock-ttl (default 10s) is how long the process's transaction locks
// stay valid without its heartbeat; another process resolves them once
// the owner is seen dead or that has passed.
//
// Exit status: 0 on success (serve, worker and oracle: also when stopped by
// SIGTERM or SIGINT, after draining; --help, -h and help too), 1 when a
// check fails or the command fails at run time (a server unavailable past
// the retry budget included), 2 on a usage error (a bad flag, extra or
// missing arguments), 130 on SIGINT (143 on SIGTERM); lock acquire --
// COMMAND exits with its command's status. A signal ends a command within
// about a second whatever its server does: the cleanup it runs after the
// signal (a rollback, counters flushed, a lock released) gets the
// connection's cleanup budget (1s), and closing its session half that.
// Only index, bank, serve, bench and restore create a store; the other
// commands fail on a directory that holds none.
package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/rpc"
)

func main() {
	// Whatever cleanup a command runs after a signal (under
	// context.WithoutCancel: a rollback, counters flushed, a lock
	// released) gets the server connection's cleanup budget (1s), so that
	// a signal ends the command within it whatever the server does.
	ctx := rpc.WithCleanup(cli.WithSignals(context.Background()))
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(args)
	root.SetArgs(append([]string{}, cli.WithTwoDashes(root, args)...)) // never nil: nil means os.Args
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	c, err := root.ExecuteContextC(ctx)
	return cli.ExitStatus(ctx, c, err, stderr)
}

// versionCmd is `version`, which --version also prints.
func versionCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:     "version",
		Short:   "print the version",
		Long:    "Print the module version, the VCS revision it was built from (+dirty if modified) and the Go version.",
		Example: "  percolator version\n  percolator --version\n  percolator version --json",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b, ok := cli.BuildOf()
			return view.Version(c.OutOrStdout(), cli.Version(), b, ok, jsonOut)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the version as JSON")
	return c
}
