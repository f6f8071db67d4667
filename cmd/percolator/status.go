package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// statusCmd is `status`: the notification backlog and the observers'
// counters; while a command holds the store, what it publishes.
func statusCmd() *cobra.Command {
	var tg cli.Target
	var jsonOut bool
	c := &cobra.Command{
		Use:   "status",
		Short: "notification backlog, observer counters, and what a running index publishes",
		Long: `Print the notification backlog per column, each observer's counters, the
scanners' and the partitions' figures, and the index's counts. While index
or bank holds an embedded store (which Pebble locks even against readers),
print what that command publishes in D/status.json instead.`,
		Example: "  percolator status --dir D\n  percolator status --server 127.0.0.1:7420 --json",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			rep, err := readStatus(c.Context(), &tg)
			if err != nil {
				return err
			}
			if jsonOut {
				return view.JSON(c.OutOrStdout(), rep)
			}
			view.PrintStatus(c.OutOrStdout(), rep)
			return nil
		},
	}
	tg.Register(c.Flags(), "database directory")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the status as JSON")
	return c
}

// readStatus reads the store's status or, if a running command holds it,
// what that command publishes.
func readStatus(ctx context.Context, tg *cli.Target) (view.Status, error) {
	if tg.Server != "" || tg.Bigtable != "" {
		rep := view.Status{Server: tg.Server, Source: "server"}
		if tg.Bigtable != "" {
			rep.Server, rep.Source = tg.String(), "bigtable"
		}
		err := cli.WithDB(ctx, tg, func(db *percolator.DB) error { return rep.FromStore(ctx, db) })
		return rep, err
	}
	rep := view.Status{Dir: tg.Dir, Source: "store"}
	db, err := percolator.Open(ctx, percolator.Options{Dir: tg.Dir, MustExist: true, DisableGC: true})
	if errors.Is(err, pebble.ErrLocked) {
		return view.PublishedStatus(tg.Dir, err)
	}
	if err != nil {
		return rep, err
	}
	err = errors.Join(rep.FromStore(ctx, db), db.Close())
	if p, perr := runstatus.Read(tg.Dir); perr == nil {
		rep.Run, rep.Age = &p, time.Since(p.Updated)
	}
	return rep, err
}
