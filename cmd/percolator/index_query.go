package main

import (
	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// indexQueryCmd is `index query WORD`: the canonical documents with WORD,
// and their titles. tg and jsonOut are index's flags, which it inherits.
func indexQueryCmd(tg *cli.Target, jsonOut *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "query WORD",
		Short: "the canonical documents with WORD, and their titles",
		Long: `List the canonical documents holding WORD, with their titles. To index a
directory named query, write ./query, or put it after "--".`,
		Example: "  percolator index --dir D query closure\n  percolator index --server 127.0.0.1:7420 --json query closure",
		Args:    cli.ArgsBetween(1, 1, "one WORD (a directory named query is indexed as ./query, or after --)"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			ctx := c.Context()
			return cli.WithDB(ctx, tg, func(db *percolator.DB) error { return view.Query(ctx, db, args[0], *jsonOut, c.OutOrStdout()) })
		},
	}
}
