package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newRoot builds the command tree for the command line argv (which the
// status file of index and bank names): one command per file, each with
// its own flags; the target's flags and the logger's are defined once
// (target.go, logging.go).
func newRoot(argv []string) *cobra.Command {
	root := &cobra.Command{
		Use:   "percolator <command>",
		Short: "Percolator's transactions and observers on a directory, a server, or Bigtable with etcd",
		Long: `percolator runs the workloads and tools of the Percolator implementation on
an embedded database directory (--dir D), a server's database (--server
ADDR) or Bigtable with etcd (--bigtable P/I/T --etcd E), and runs the
server, the oracle and the workers.`,
		Example: `  percolator index --dir D --verify ~/docs
  percolator status --dir D
  percolator help index`,
		Args:          cobra.ArbitraryArgs,
		RunE:          runUnknown,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionString(),
	}
	root.Flags().Bool("version", false, "print the version (module version, VCS revision, Go version)")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetUsageFunc(usage)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	root.SetHelpCommand(helpCmd())
	root.CompletionOptions.DisableDefaultCmd = true // completion.go's, whose arguments are checked
	root.AddCommand(indexCmd(argv), statusCmd(), notificationsCmd(), bankCmd(argv), dumpCmd(), locksCmd(), unobserveCmd(),
		serveCmd(), workerCmd(), oracleCmd(), benchCmd(), initCmd(), lockCmd(), queueCmd(), graphCmd(), devclusterCmd(),
		versionCmd(), completionCmd(), benchClientCmd(), verifyCmd())
	return root
}

// runUnknown runs when no command was named, or an unknown one: the
// usage on stderr, and a usage error.
func runUnknown(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		c.SetOut(c.ErrOrStderr())
		_ = c.Usage()
		return usageError{}
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{msg}
}

// groupRun runs a command family named without one of its commands:
// `help` prints its usage, anything else is a usage error.
func groupRun(c *cobra.Command, args []string) error {
	if len(args) == 1 && args[0] == "help" {
		return c.Help()
	}
	c.SetOut(c.ErrOrStderr())
	_ = c.Usage()
	if len(args) == 0 {
		return usagef("a command is required")
	}
	return usagef("unknown command %q", args[0])
}

// helpCmd is `help [COMMAND...]`: the usage of percolator or of a
// command, exit 0; an unknown command is a usage error.
func helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND...]",
		Short: "print this help, or a command's",
		Example: `  percolator help
  percolator help lock acquire`,
		Args: cobra.ArbitraryArgs, // a command's path, checked by RunE
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("unknown command %q", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}

// usage prints a command's usage line, examples, commands and flags.
func usage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprintf(w, "usage: %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(w, "\nexamples:\n%s\n", c.Example)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintln(w, "\ncommands:")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() || s.Name() == "help" {
				fmt.Fprintf(w, "  %-*s %s\n", s.NamePadding(), s.Name(), s.Short)
			}
		}
	}
	printFlags(w, "flags", c.LocalFlags())
	if c.HasParent() {
		printFlags(w, "flags of every "+c.Parent().CommandPath()+" command", c.InheritedFlags())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", c.CommandPath())
	}
	if !c.HasParent() {
		fmt.Fprintln(w, "Exit status: 0 success, 1 failed check or run-time failure, 2 usage error, 130 interrupted (143 on SIGTERM).")
	}
	return nil
}

func printFlags(w io.Writer, title string, fs *pflag.FlagSet) {
	if fs.HasAvailableFlags() {
		fmt.Fprintf(w, "\n%s:\n%s", title, fs.FlagUsages())
	}
}

// withTwoDashes rewrites -name and -name=value, where name is a long
// flag of the command tree, to --name: the commands were first written
// with the flag package, which takes long flags after one dash too, and
// scripts may pass them so. Arguments after "--" are left alone.
func withTwoDashes(root *cobra.Command, args []string) []string {
	names := map[string]bool{"help": true, "version": true}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && names[name] {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}
