package main

import (
	"fmt"

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
			prog := progress.New(ctx, c.ErrOrStderr(), quiet || jsonOut)
			return cli.WithDB(ctx, &tg, func(db *percolator.DB) error {
				// The wait for an oracle sample is a phase of its own, with
				// nothing to count; the pass's rows are counted from its
				// first batch on.
				prog.Start(fmt.Sprintf("sampling the oracle (the safe point is a sample %v old): samples", tg.GCLifetime), progress.Unknown)
				collecting := false
				res, err := db.GCWith(ctx, percolator.GCOptions{DryRun: dry, Progress: func(rows, versions, bytes int) {
					if !collecting {
						collecting = true
						prog.Set(1)
						prog.Start("collecting: rows visited", progress.Unknown)
					}
					prog.Detail(int64(rows), fmt.Sprintf("%d versions (%s) %s", versions, view.Bytes(int64(bytes)), removedWord(dry)))
				}})
				prog.End(err)
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
