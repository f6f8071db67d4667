package main

import (
	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
)

// dumpCmd is `dump`: rows' data, lock and write columns by timestamp,
// decoded as the tables of the paper.
func dumpCmd() *cobra.Command {
	var tg cli.Target
	var o view.DumpOptions
	c := &cobra.Command{
		Use:   "dump",
		Short: "rows' data / lock / write columns by timestamp, decoded",
		Long: `Lay each row out like the tables of the paper's Bob/Joe walk-through:
per column, one line per timestamp, newest first, with its data, lock and
write cells side by side, records and the index's binary values decoded,
values cut at 60 bytes unless --full.`,
		Example: "  percolator dump --dir D --row Bob\n  percolator dump --dir D --prefix doc/ --limit 5 --full",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case o.Limit < 1:
				return cli.Usagef("--limit must be at least 1")
			case o.Row != "" && o.Prefix != "":
				return cli.Usagef("--row and --prefix exclude each other")
			}
			if err := tg.Validate(); err != nil {
				return err
			}
			ctx := c.Context()
			return cli.WithDB(ctx, &tg, func(db *percolator.DB) error { return view.Dump(ctx, db, o, c.OutOrStdout()) })
		},
	}
	fs := c.Flags()
	tg.Register(fs, "database directory")
	fs.StringVar(&o.Prefix, "prefix", "", "dump the rows starting with this prefix (default: every row, up to --limit)")
	fs.StringVar(&o.Row, "row", "", "dump this one row")
	fs.IntVar(&o.Limit, "limit", 20, "rows to dump at most")
	fs.BoolVar(&o.Full, "full", false, "show whole values (they are cut at 60 bytes otherwise)")
	fs.BoolVar(&o.JSON, "json", false, "print the cells as JSON")
	return c
}
