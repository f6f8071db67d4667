// Command percolator runs the Percolator implementation's workloads and
// tools on an embedded database directory (--dir D) or a server's
// database (--server ADDR), and runs the server.
//
//	percolator index --dir D | --server ADDR  SRC_DIR | query WORD | --dups
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
//	percolator devcluster --dir D
//	percolator version | help [COMMAND]
//
// With --server, --token-file F (or $PERCOLATOR_TOKEN) gives the token and
// --tls-ca the CA of a TLS server. A server that does not answer (down,
// restarting, unreachable) is retried for --retry-budget (default 30s) per
// operation (a transaction, a read, opening; a worker's whole run); then
// the command fails, naming the server.
//
// Exit status: 0 on success (serve, worker and oracle: also when stopped by
// SIGTERM or SIGINT, after draining), 1 when a check fails or the command
// fails at run time (a server unavailable past the retry budget included),
// 2 on a usage error, 130 on SIGINT (143 on SIGTERM). A signal ends a
// command within about a second whatever its server does: the cleanup it
// runs after the signal (a rollback, counters flushed, a lock released)
// gets the connection's cleanup budget (1s), and closing its session half
// that.
// Only index, bank, serve and bench create a store; the other commands
// fail on a directory that holds none.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/seed-992972ee/percolator/rpc"
)

type subcommand struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []subcommand{
	{"index", "the main job: keep an index of a directory current with observers", runIndex},
	{"status", "notification backlog, observer counters, and what a running index publishes", runStatus},
	{"notifications", "pending or --quarantined notifications; --retry re-queues", runNotifications},
	{"bank", "concurrent transfers checked by snapshot totals", runBank},
	{"dump", "rows' data / lock / write columns by timestamp, decoded", runDump},
	{"locks", "list (and --resolve) the locks in the store", runLocks},
	{"unobserve", "unregister an observer: no write notifies it any more", runUnobserve},
	{"serve", "serve a database (store, oracle, lock service) over gRPC to many processes", runServe},
	{"worker", "run the index job's observers in an extra process (--server)", runWorker},
	{"oracle", "one candidate of the timestamp oracle elected through etcd (run two or more)", runOracle},
	{"bench", "the performance figures, each against its target", runBench},
	{"init", "create a Bigtable table for percolator (--bigtable P/I/T; idempotent)", runInit},
	{"lock", "leased locks: acquire (and run a command holding it), release, show (percolator lock help)", runLock},
	{"queue", "work queues: push, consume (pop under a lease, print, ack), stats, dead (percolator queue help)", runQueue},
	{"graph", "S2Graph's edges: load, insert, delete, query, degree, check (percolator graph help)", runGraph},
	{"devcluster", "the Bigtable emulator and one etcd member on local ports, for trying the distributed commands", runDevcluster},
	{"version", "print the version", runVersion},
	{"help", "print this help, or a command's", nil},
}

// exitCode is the exit status of a command run for the user (lock
// acquire -- COMMAND), passed on as percolator's own.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// errFailed marks a run whose check failed: exit 1.
var errFailed = errors.New("check failed")

// usageError is a wrong command line: exit 2. An empty message means the
// flag package already printed one.
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
	os.Exit(run(rpc.WithCleanup(ctx), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, args[1:], stdout, stderr)
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "percolator: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return exitStatus(ctx, c.name, c.run(ctx, args[1:], stdout, stderr), stderr)
}

// hidden are commands not listed in the help: the client processes of
// bench's server figures.
var hidden = []subcommand{
	{"bench-client", "a client process of bench --server's oracle figure", runBenchClient},
}

func lookup(name string) *subcommand {
	for _, cs := range [][]subcommand{commands, hidden} {
		for i := range cs {
			if cs[i].name == name && cs[i].run != nil {
				return &cs[i]
			}
		}
	}
	return nil
}

// exitStatus prints err (if any) and maps it to the exit status.
func exitStatus(ctx context.Context, name string, err error, stderr io.Writer) int {
	var ue usageError
	var sig interrupted
	var ce exitCode
	switch {
	case errors.Is(err, errDrained):
		return 0
	case errors.As(err, &ce):
		return int(ce) // a command run for the user ended so: its status
	case errors.As(context.Cause(ctx), &sig):
		fmt.Fprintf(stderr, "percolator %s: %v\n", name, sig)
		return sig.exitCode()
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintf(stderr, "percolator %s: %s\nRun 'percolator %s -h' for usage.\n", name, ue.msg, name)
		}
		return 2
	}
	// The API's errors already say "percolator: "; the command's name
	// replaces it.
	fmt.Fprintf(stderr, "percolator %s: %s\n", name, strings.TrimPrefix(err.Error(), "percolator: "))
	return 1
}

// runHelp prints the usage (exit 0), or a command's flags.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "percolator help: unknown command %q\n", args[0])
		return 2
	}
	return exitStatus(ctx, c.name, c.run(ctx, []string{"-h"}, stdout, stdout), stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: percolator <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun 'percolator <command> -h' for a command's flags.")
	fmt.Fprintln(w, "Exit status: 0 success, 1 failed check or run-time failure, 2 usage error, 130 interrupted.")
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionString())
	return nil
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

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("percolator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args; a bad flag is a usage error (already printed
// with the flags by the flag package), -h is flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{}
}
