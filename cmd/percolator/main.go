// Command percolator runs the Percolator implementation's workloads and
// tools on an embedded database directory (--dir D), a server's database
// (--server ADDR) or Bigtable with etcd (--bigtable P/I/T --etcd E), and
// runs the server, the elected oracle and extra workers. It is a command
// line only: each command (one per file, on github.com/spf13/cobra)
// parses its flags, calls a package and prints. The index job is
// docindex.RunJob, the bank workload.RunBank, the figures package bench.
//
//	percolator index --dir D | --server ADDR [flags] SRC_DIR
//	percolator index --dir D | --server ADDR query WORD
//	percolator index --dir D | --server ADDR --dups
//	percolator status --dir D | --server ADDR
//	percolator notifications --dir D | --server ADDR [--quarantined] [--retry]
//	percolator bank  --dir D | --server ADDR [--accounts N --workers W --duration T]
//	percolator dump  --dir D | --server ADDR [--prefix P]
//	percolator locks --dir D | --server ADDR [--resolve]
//	percolator serve --dir D [--listen 127.0.0.1:7420] [--metrics ADDR] [--token-file F] [--tls-cert C --tls-key K]
//	percolator worker --server ADDR [--scanners N]
//	percolator oracle --etcd ENDPOINTS --bigtable PROJECT/INSTANCE/TABLE [--listen 127.0.0.1:7430] [--etcd-prefix P] [--lease 3s] [--token-file F]
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
// Exit status: 0 on success (serve, worker and oracle: also when stopped by
// SIGTERM or SIGINT, after draining; --help, -h and help too), 1 when a
// check fails or the command fails at run time (a server unavailable past
// the retry budget included), 2 on a usage error (a bad flag, extra or
// missing arguments), 130 on SIGINT (143 on SIGTERM); lock acquire --
// COMMAND exits with its command's status. A signal ends a command within
// about a second whatever its server does: the cleanup it runs after the
// signal (a rollback, counters flushed, a lock released) gets the
// connection's cleanup budget (1s), and closing its session half that.
// Only index, bank, serve and bench create a store; the other commands
// fail on a directory that holds none.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/rpc"
)

// exitCode is the exit status of a command run for the user (lock
// acquire -- COMMAND), passed on as percolator's own.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// errFailed marks a run whose check failed: exit 1.
var errFailed = errors.New("check failed")

// errDrained: a long-running command (serve, worker, oracle) stopped
// cleanly on a signal: exit 0.
var errDrained = errors.New("stopped cleanly")

// usageError is a wrong command line: exit 2. An empty message means the
// usage was already printed.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// interrupted is the cause of the context's end when a signal ended the
// run.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// exitCode is the conventional status of a process ended by the signal.
func (i interrupted) exitCode() int { return 128 + int(i.sig) }

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(interrupted{sig.(syscall.Signal)})
		signal.Stop(sigs) // a second signal kills at once
	}()
	// Whatever cleanup a command runs after the signal (under
	// context.WithoutCancel: a rollback, counters flushed, a lock
	// released) gets the server connection's cleanup budget (1s), so that
	// a signal ends the command within it whatever the server does.
	os.Exit(run(rpc.WithCleanup(ctx), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(args)
	root.SetArgs(append([]string{}, withTwoDashes(root, args)...)) // never nil: nil means os.Args
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	c, err := root.ExecuteContextC(ctx)
	return exitStatus(ctx, c, err, stderr)
}

// exitStatus prints err (if any) and maps it to the exit status.
func exitStatus(ctx context.Context, c *cobra.Command, err error, stderr io.Writer) int {
	name := "percolator"
	if c != nil {
		name = c.CommandPath()
	}
	var ue usageError
	var sig interrupted
	var ce exitCode
	switch {
	case errors.Is(err, errDrained):
		return 0
	case errors.As(err, &ce):
		return int(ce) // a command run for the user ended so: its status
	case errors.As(context.Cause(ctx), &sig):
		fmt.Fprintf(stderr, "%s: %v\n", name, sig)
		return sig.exitCode()
	case err == nil:
		return 0
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for usage.\n", name, ue.msg, name)
		}
		return 2
	}
	// The API's errors already say "percolator: "; the command's name
	// replaces it.
	fmt.Fprintf(stderr, "%s: %s\n", name, strings.TrimPrefix(err.Error(), "percolator: "))
	return 1
}

// versionCmd is `version`, which --version also prints.
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print the version",
		Long:    "Print the module version, the VCS revision it was built from (+dirty if modified) and the Go version.",
		Example: "  percolator version\n  percolator --version",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), versionString())
			return nil
		},
	}
}

// versionString is the module version, the VCS revision it was built
// from (when known) and the Go version.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "percolator (unknown version)"
	}
	v := "percolator " + bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " (" + rev + modified + ")"
	}
	return v + " " + bi.GoVersion
}

// noArgs refuses arguments: a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	return nil
}

// argsBetween wants from min to max arguments (max < 0: no limit), named
// what in the message.
func argsBetween(lo, hi int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || hi >= 0 && len(args) > hi {
			return usagef("want %s, got %d arguments %q", what, len(args), args)
		}
		return nil
	}
}
