package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/workload"
)

// bankCmd is `bank`: the bank workload (package workload) on the
// target's database, its progress printed and published, its
// acknowledgements printed with --ack. argv is the command line, which
// the status file names.
func bankCmd(argv []string) *cobra.Command {
	var tg cli.Target
	var opts workload.BankOptions
	var quiet, jsonOut bool
	c := &cobra.Command{
		Use:   "bank",
		Short: "concurrent transfers checked by snapshot totals",
		Long: `Run the bank of the seeds: workers transfer between random accounts while
readers sum every balance in read-only snapshots; snapshot isolation holds
exactly when every sum is accounts x initial. Exit 1 if any is not.`,
		Example: "  percolator bank --dir D --accounts 1000 --workers 64 --duration 10s\n  percolator bank --server 127.0.0.1:7420 --ack --quiet",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.Validate(); err != nil {
				return err
			}
			if opts.Validate() != nil {
				return cli.Usagef("need --accounts >= 2, --workers >= 1, --readers >= 0, --duration > 0, --initial >= 0")
			}
			if jsonOut && opts.Record {
				return cli.Usagef("--json and --ack both print to stdout: choose one")
			}
			return runBank(c.Context(), &tg, opts, bankOutput{quiet, jsonOut}, argv, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fs := c.Flags()
	tg.Register(fs, "database directory (created if needed)")
	fs.IntVar(&opts.Accounts, "accounts", 1000, "number of accounts")
	fs.IntVar(&opts.Workers, "workers", 64, "concurrent transfer workers")
	fs.IntVar(&opts.Readers, "readers", 2, "concurrent snapshot readers summing all balances")
	fs.DurationVar(&opts.Duration, "duration", 10*time.Second, "how long to run")
	fs.Int64Var(&opts.Initial, "initial", 100, "initial balance of each account")
	fs.BoolVar(&opts.Record, "ack", false, "record each transfer in its own row and print 'ack ROW' once it committed")
	fs.BoolVar(&quiet, "quiet", false, "no progress")
	fs.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// bankOutput is how bank prints: without its progress lines (quiet), its
// result as JSON.
type bankOutput struct{ quiet, json bool }

// runBank runs the bank on the target's database, publishing its status.
func runBank(ctx context.Context, tg *cli.Target, opts workload.BankOptions, out bankOutput, argv []string, stdout, stderr io.Writer) error {
	db, err := tg.Open(ctx, true)
	if err != nil {
		return err
	}
	pub := runstatus.Start(tg.PublishDir(), argv)
	prog := progress.New(ctx, stderr, out.quiet)
	view.BankReports(&opts, pub, prog, stdout, stderr)
	prog.Start(view.BankLabel, progress.Unknown)
	res, err := workload.RunBank(ctx, db, opts)
	view.BankProgress(prog, res.BankCounts) // the counts at the end, not the last second's
	prog.End(err)
	if errors.Is(err, workload.ErrAccounts) {
		err = fmt.Errorf("%s: %w", tg, err)
	}
	if err == nil && res.Wrong > 0 {
		err = fmt.Errorf("%w: %d of %d snapshots saw a wrong total", cli.ErrFailed, res.Wrong, res.Snapshots)
	}
	pub.Set(func(p *runstatus.Status) { p.Summary = []string{res.String()} })
	pub.Finish(err)
	if res.Elapsed > 0 {
		err = errors.Join(err, view.BankResult(stdout, res, out.json))
	}
	return errors.Join(err, db.Close())
}
