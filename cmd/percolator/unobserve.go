package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
)

// unobserveCmd is `unobserve NAME`: unregister an observer
// (db.Unobserve). Its pending notifications are cleared by the next
// scanners if no other observer watches its column; the index job
// registers its observers again on its next run.
func unobserveCmd() *cobra.Command {
	var tg target
	c := &cobra.Command{
		Use:     "unobserve NAME",
		Short:   "unregister an observer: no write notifies it any more",
		Example: "  percolator unobserve --dir D terms",
		Args:    argsBetween(1, 1, "the name of one observer (percolator status lists them)"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := tg.validate(); err != nil {
				return err
			}
			ctx, name := c.Context(), args[0]
			return withDB(ctx, &tg, func(db *percolator.DB) error {
				if err := db.Unobserve(ctx, name); err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "unregistered observer %s\n", name)
				return nil
			})
		},
	}
	tg.register(c.Flags(), "database directory")
	return c
}
