package main

import (
	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// notificationsCmd is `notifications`: the pending (default) or
// quarantined notifications; --retry re-queues the quarantined ones.
func notificationsCmd() *cobra.Command {
	var tg cli.Target
	var quarantined, retry, jsonOut bool
	var limit int
	c := &cobra.Command{
		Use:     "notifications",
		Short:   "pending or --quarantined notifications; --retry re-queues",
		Example: "  percolator notifications --dir D --limit 20\n  percolator notifications --dir D --quarantined --json\n  percolator notifications --dir D --retry",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 0 {
				return cli.Usagef("--limit must be at least 0")
			}
			if err := tg.Validate(); err != nil {
				return err
			}
			ctx, w := c.Context(), c.OutOrStdout()
			return cli.WithDB(ctx, &tg, func(db *percolator.DB) error {
				switch {
				case retry:
					prog := progress.New(ctx, c.ErrOrStderr(), false)
					n, err := db.RetryQuarantinedWith(ctx, prog.ListThenDo("listing quarantined notifications", "re-queueing notifications"))
					prog.End(err)
					if err != nil {
						return err
					}
					return view.Requeued(w, n, jsonOut)
				case quarantined:
					qs, err := db.Quarantine(ctx)
					if err != nil {
						return err
					}
					return view.Quarantined(w, qs, jsonOut)
				}
				ps, err := db.PendingNotifications(ctx, limit)
				if err != nil {
					return err
				}
				return view.Pending(w, ps, limit, jsonOut)
			})
		},
	}
	tg.Register(c.Flags(), "database directory")
	c.Flags().BoolVar(&quarantined, "quarantined", false, "list the quarantined notifications")
	c.Flags().BoolVar(&retry, "retry", false, "re-queue every quarantined notification")
	c.Flags().IntVar(&limit, "limit", 100, "list at most this many pending notifications (0: all)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the list (or --retry's count) as JSON")
	return c
}
