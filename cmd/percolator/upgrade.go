package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// upgradeCmd is `upgrade`: move a store of an older on-disk format to this
// build's (percolator.Upgrade, cluster.Upgrade). It runs alone: on a
// directory it holds the store's lock; on Bigtable it refuses while any
// process has a session in etcd. A server is stopped and its directory
// upgraded.
func upgradeCmd() *cobra.Command {
	var tg cli.Target
	c := &cobra.Command{
		Use:   "upgrade",
		Short: "move a store of an older on-disk format to this build's",
		Long: fmt.Sprintf(`Move a store of an older on-disk format to this build's (format %d).
Nothing else may run on the store: on a directory, stop every process that
has it open (a server included: upgrade its directory, then start it
again); on Bigtable, stop every process with a session in etcd (workers,
clients; the oracles may run). A store already of this format is left as
it is; a store of a newer format is refused.`, percolator.FormatVersion),
		Example: "  percolator upgrade --dir D\n  percolator upgrade --bigtable P/I/T --etcd 127.0.0.1:2379",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			if tg.Server != "" {
				return cli.Usagef("--server: a server holds its store; stop it, run percolator upgrade --dir on its directory, and start it again")
			}
			var from uint64
			var err error
			if tg.Bigtable != "" {
				opts := cluster.Options{Etcd: cluster.ParseEndpoints(tg.Etcd), Prefix: tg.EtcdPrefix,
					DB: percolator.Options{RetryBudget: tg.RetryBudget}}
				if err := opts.Bigtable.ParseTable(tg.Bigtable); err != nil {
					return cli.Usagef("--bigtable: %v", err)
				}
				from, err = cluster.Upgrade(c.Context(), opts)
			} else {
				from, err = percolator.Upgrade(c.Context(), percolator.Options{Dir: tg.Dir})
			}
			if err != nil {
				return err
			}
			if from == percolator.FormatVersion {
				fmt.Fprintf(c.OutOrStdout(), "the store is of format %d already: nothing to do\n", from)
				return nil
			}
			fmt.Fprintf(c.OutOrStdout(), "upgraded the store from format %d to %d\n", from, percolator.FormatVersion)
			return nil
		},
	}
	tg.Register(c.Flags(), "database directory")
	return c
}
