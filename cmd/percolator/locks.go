package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// locksCmd is `locks`: the locks in the store, settled first with
// --resolve.
func locksCmd() *cobra.Command {
	var tg cli.Target
	var resolve, jsonOut bool
	c := &cobra.Command{
		Use:     "locks",
		Short:   "list (and --resolve) the locks in the store",
		Long:    "List the locks in the store; with --resolve, first settle those of committed, rolled-back, dead or expired transactions.",
		Example: "  percolator locks --dir D\n  percolator locks --server 127.0.0.1:7420 --resolve --json",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			ctx, w := c.Context(), c.OutOrStdout()
			return cli.WithDB(ctx, &tg, func(db *percolator.DB) error {
				if resolve {
					prog := progress.New(ctx, c.ErrOrStderr(), false)
					n, err := db.ResolveLocksWith(ctx, prog.ListThenDo("listing locks", "resolving locks"))
					prog.End(err)
					if err != nil {
						return err
					}
					say := w
					if jsonOut {
						say = c.ErrOrStderr() // stdout holds the list alone, as JSON
					}
					fmt.Fprintf(say, "resolved %d locks\n", n)
				}
				locks, err := db.Locks(ctx)
				if err != nil {
					return err
				}
				return view.Locks(w, locks, jsonOut)
			})
		},
	}
	tg.Register(c.Flags(), "database directory")
	c.Flags().BoolVar(&resolve, "resolve", false, "settle the locks of committed, rolled-back, dead or expired transactions")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the locks as JSON (--resolve's count then goes to stderr)")
	return c
}
