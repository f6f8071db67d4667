package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// gcCmd is `gc`: one full garbage collection pass (DB.GCWith), or a dry
// run of one.
func gcCmd() *cobra.Command {
	var tg cli.Target
	var dry, jsonOut, quiet bool
	c := &cobra.Command{
		Use:   "gc",
		Short: "run one garbage collection pass: remove the versions no readable snapshot needs",
		Long: `Run one full garbage collection pass and print what it removed: every
version older than the newest one a snapshot --gc-lifetime old (or the oldest
open transaction, if older) reads. The safe point is a timestamp sampled at
least --gc-lifetime ago by this process, so the pass first waits one
lifetime. Embedded stores and servers also collect in the background; this
runs a pass now. --dry-run counts what the pass would remove, changing
nothing.`,
		Example: "  percolator gc --dir D --gc-lifetime 1m\n  percolator gc --server 127.0.0.1:7420 --dry-run --json",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			if tg.GCLifetime == 0 {
				return cli.Usagef("--gc-lifetime 0 turns collection off; give the lifetime to collect below")
			}
			ctx := c.Context()
			tg.NoBackgroundGC = true // this pass is the one that counts
			prog := progress.New(c.ErrOrStderr(), quiet || jsonOut)
			return cli.WithDB(ctx, &tg, func(db *percolator.DB) error {
				prog.Begin(fmt.Sprintf("sampling the oracle; the safe point is a sample %v old", tg.GCLifetime))
				var began time.Time // the first batch's end: the wait for a sample is before it
				res, err := db.GCWith(ctx, percolator.GCOptions{DryRun: dry, Progress: func(rows, versions, bytes int) {
					rate := ""
					if began.IsZero() {
						began = time.Now()
					} else if d := time.Since(began).Seconds(); d > 0 {
						rate = fmt.Sprintf(", %.0f rows/s", float64(rows)/d)
					}
					prog.Count(fmt.Sprintf("collecting: %d versions (%s) %s%s; rows visited",
						versions, view.Bytes(int64(bytes)), removedWord(dry), rate), int64(rows))
				}})
				prog.End()
				if err != nil {
					return err
				}
				if jsonOut {
					return view.JSON(c.OutOrStdout(), view.GCReportOf(res))
				}
				view.PrintGC(c.OutOrStdout(), res)
				return nil
			})
		},
	}
	tg.Register(c.Flags(), "database directory")
	c.Flags().BoolVar(&dry, "dry-run", false, "count what the pass would remove, changing nothing")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress")
	return c
}

func removedWord(dry bool) string {
	if dry {
		return "to remove"
	}
	return "removed"
}
