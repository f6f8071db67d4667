package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
)

// notificationsCmd is `notifications`: the pending (default) or
// quarantined notifications; --retry re-queues the quarantined ones.
func notificationsCmd() *cobra.Command {
	var tg target
	var quarantined, retry, jsonOut bool
	var limit int
	c := &cobra.Command{
		Use:     "notifications",
		Short:   "pending or --quarantined notifications; --retry re-queues",
		Example: "  percolator notifications --dir D --limit 20\n  percolator notifications --dir D --quarantined --json\n  percolator notifications --dir D --retry",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit must be at least 0")
			}
			if err := tg.validate(); err != nil {
				return err
			}
			ctx, w := c.Context(), c.OutOrStdout()
			return withDB(ctx, &tg, func(db *percolator.DB) error {
				switch {
				case retry:
					n, err := db.RetryQuarantined(ctx)
					if err == nil {
						fmt.Fprintf(w, "re-queued %d notifications\n", n)
					}
					return err
				case quarantined:
					return printQuarantined(ctx, db, jsonOut, w)
				}
				return printPending(ctx, db, limit, jsonOut, w)
			})
		},
	}
	tg.register(c.Flags(), "database directory")
	c.Flags().BoolVar(&quarantined, "quarantined", false, "list the quarantined notifications")
	c.Flags().BoolVar(&retry, "retry", false, "re-queue every quarantined notification")
	c.Flags().IntVar(&limit, "limit", 100, "list at most this many pending notifications (0: all)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the list as JSON")
	return c
}

func printQuarantined(ctx context.Context, db *percolator.DB, jsonOut bool, w io.Writer) error {
	qs, err := db.Quarantine(ctx)
	if err != nil {
		return err
	}
	type entry struct {
		Row      string `json:"row"`
		Column   string `json:"column"`
		Observer string `json:"observer"`
		Failures int    `json:"failures"`
		Error    string `json:"error"`
	}
	list := []entry{}
	for _, q := range qs {
		list = append(list, entry{displayPath(q.Row), q.Column, q.Observer, q.Failures, q.Error})
	}
	if jsonOut {
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tOBSERVER\tFAILURES\tERROR")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", e.Row, e.Column, e.Observer, e.Failures, firstLineOf(e.Error))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d quarantined\n", len(list))
	return nil
}

func printPending(ctx context.Context, db *percolator.DB, limit int, jsonOut bool, w io.Writer) error {
	ps, err := db.PendingNotifications(ctx, limit)
	if err != nil {
		return err
	}
	type entry struct {
		Row      string        `json:"row"`
		Column   string        `json:"column"`
		Versions int           `json:"changes"`
		Age      time.Duration `json:"age_ns"`
	}
	list := []entry{}
	for _, p := range ps {
		list = append(list, entry{displayPath(p.Row), p.Column, p.Versions, p.Age})
	}
	if jsonOut {
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tCHANGES\tAGE")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", e.Row, e.Column, e.Versions, e.Age.Round(time.Millisecond))
	}
	_ = tw.Flush()
	shown := "all"
	if limit > 0 {
		shown = fmt.Sprintf("at most %d", limit)
	}
	fmt.Fprintf(w, "%d pending (listing %s)\n", len(list), shown)
	return nil
}
