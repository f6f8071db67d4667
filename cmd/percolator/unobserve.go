package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// unobserveCmd is `unobserve NAME`: unregister an observer
// (db.Unobserve). Its pending notifications are cleared by the next
// scanners if no other observer watches its column; the index job
// registers its observers again on its next run.
func unobserveCmd() *cobra.Command {
	var tg cli.Target
	c := &cobra.Command{
		Use:     "unobserve NAME",
		Short:   "unregister an observer: no write notifies it any more",
		Example: "  percolator unobserve --dir D terms",
		Args:    cli.ArgsBetween(1, 1, "the name of one observer (percolator status lists them)"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			ctx, name := c.Context(), args[0]
			return cli.WithDB(ctx, &tg, func(db *percolator.DB) error {
				if err := db.Unobserve(ctx, name); err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "unregistered observer %s\n", name)
				return nil
			})
		},
	}
	tg.Register(c.Flags(), "database directory")
	return c
}
