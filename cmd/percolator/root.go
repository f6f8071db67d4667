package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/verifycmd"
)

// newRoot builds the command tree for the command line argv (which the
// status file of index and bank names): one command per file, each with
// its own flags; the target's flags and the logger's are defined once
// (package cli).
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
		RunE:          cli.RunUnknown,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       cli.Version(),
	}
	root.Flags().Bool("version", false, "print the version (module version, VCS revision, Go version)")
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetUsageFunc(cli.Usage)
	root.SetFlagErrorFunc(cli.FlagError)
	root.SetHelpCommand(helpCmd())
	root.CompletionOptions.DisableDefaultCmd = true // completion.go's, whose arguments are checked
	root.AddCommand(indexCmd(argv), statusCmd(), notificationsCmd(), bankCmd(argv), dumpCmd(), locksCmd(), unobserveCmd(),
		backupCmd(), restoreCmd(),
		serveCmd(), workerCmd(), oracleCmd(), benchCmd(), initCmd(), lockCmd(), queueCmd(), graphCmd(), devclusterCmd(),
		versionCmd(), completionCmd(), benchClientCmd(), verifycmd.Command(), upgradeCmd(), gcCmd(), genDocsCmd())
	return root
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
				return cli.Usagef("unknown command %q", strings.Join(args, " "))
			}
			target.InitDefaultHelpFlag() // listed as `target -h` lists it
			return target.Help()
		},
	}
}
