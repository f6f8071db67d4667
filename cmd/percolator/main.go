// Command percolator runs the Percolator implementation's workloads and
// tools on an embedded database directory.
//
//	percolator index --dir D SRC_DIR | query WORD | --dups
//	percolator status --dir D
//	percolator notifications --dir D [--quarantined] [--retry]
//	percolator bank  --dir D [--accounts N --workers W --duration T]
//	percolator dump  --dir D [--row R]
//	percolator bench --dir D
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type subcommand struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []subcommand{
	{"index", "the main job: keep an index of a directory current with observers", runIndex},
	{"status", "notification backlog and observer counters", runStatus},
	{"notifications", "pending or --quarantined notifications; --retry re-queues", runNotifications},
	{"bank", "concurrent transfers checked by snapshot totals", runBank},
	{"dump", "a row's data / lock / write columns by timestamp", runDump},
	{"locks", "list (and --resolve) the locks in the store", runLocks},
	{"bench", "the performance figures: oracle, writes, reads, bank", runBench},
}

// errFailed marks a run whose check failed; main exits 1 without a usage
// message.
var errFailed = errors.New("check failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errFailed):
				fmt.Fprintln(stderr, "percolator:", err)
				return 1
			}
			fmt.Fprintf(stderr, "percolator %s: %v\n", c.name, err)
			return 2
		}
	}
	fmt.Fprintf(stderr, "percolator: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: percolator <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun 'percolator <command> -h' for a command's flags.")
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("percolator "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func requireDir(dir string) error {
	if dir == "" {
		return errors.New("--dir is required")
	}
	return nil
}
