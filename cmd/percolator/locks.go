package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
)

// locksCmd is `locks`: the locks in the store, settled first with
// --resolve.
func locksCmd() *cobra.Command {
	var tg target
	var resolve, jsonOut bool
	c := &cobra.Command{
		Use:     "locks",
		Short:   "list (and --resolve) the locks in the store",
		Long:    "List the locks in the store; with --resolve, first settle those of committed, rolled-back, dead or expired transactions.",
		Example: "  percolator locks --dir D\n  percolator locks --server 127.0.0.1:7420 --resolve --json",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.validate(); err != nil {
				return err
			}
			ctx, w := c.Context(), c.OutOrStdout()
			return withDB(ctx, &tg, func(db *percolator.DB) error {
				if resolve {
					n, err := db.ResolveLocks(ctx)
					if err != nil {
						return err
					}
					fmt.Fprintf(w, "resolved %d locks\n", n)
				}
				return printLocks(ctx, db, jsonOut, w)
			})
		},
	}
	tg.register(c.Flags(), "database directory")
	c.Flags().BoolVar(&resolve, "resolve", false, "settle the locks of committed, rolled-back, dead or expired transactions")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the locks as JSON")
	return c
}

func printLocks(ctx context.Context, db *percolator.DB, jsonOut bool, w io.Writer) error {
	locks, err := db.Locks(ctx)
	if err != nil {
		return err
	}
	type entry struct {
		Row     string `json:"row"`
		Column  string `json:"column"`
		StartTS uint64 `json:"start_ts"`
		Op      string `json:"op"`
		Primary string `json:"primary"`
		Owner   string `json:"owner"`
		Expires string `json:"expires"`
	}
	list := []entry{}
	for _, l := range locks {
		list = append(list, entry{displayPath(string(l.Row)), displayText(l.Column), l.StartTS, l.Lock.Op.String(),
			displayPath(string(l.Lock.PrimaryRow)) + "/" + displayText(l.Lock.PrimaryCol), l.Lock.Owner, l.Expires.Format("15:04:05.000")})
	}
	if jsonOut {
		return writeJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tCOLUMN\tSTART_TS\tOP\tPRIMARY\tOWNER\tEXPIRES")
	for _, e := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", e.Row, e.Column, e.StartTS, e.Op, e.Primary, e.Owner, e.Expires)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d locks\n", len(list))
	return nil
}
