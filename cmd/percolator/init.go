package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// initCmd is `init --bigtable PROJECT/INSTANCE/TABLE [--fix]`: create the
// table and its family (idempotent). A family with a garbage-collection
// rule is refused (the rule deletes live data: cell times are protocol
// timestamps); --fix removes the rule.
func initCmd() *cobra.Command {
	var table string
	var fix bool
	var budget time.Duration
	c := &cobra.Command{
		Use:     "init",
		Short:   "create a Bigtable table for percolator (--bigtable P/I/T; idempotent)",
		Example: "  percolator init --bigtable my-project/my-instance/percolator\n  percolator init --bigtable my-project/my-instance/percolator --fix",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runInit(c.Context(), table, fix, budget, c.OutOrStdout())
		},
	}
	c.Flags().StringVar(&table, "bigtable", "", "the Bigtable table to create, PROJECT/INSTANCE/TABLE (BIGTABLE_EMULATOR_HOST is honoured; credentials: the client library's defaults)")
	c.Flags().BoolVar(&fix, "fix", false, "remove a garbage-collection rule from the table's family (any rule deletes live data here: cell times are protocol timestamps, instants in 1970); cells it already deleted stay gone")
	c.Flags().DurationVar(&budget, "retry-budget", 30*time.Second, "how long to wait for Bigtable to answer (an emulator still starting, say) before failing")
	return c
}

func runInit(ctx context.Context, table string, fix bool, budget time.Duration, stdout io.Writer) error {
	if table == "" {
		return cli.Usagef("--bigtable PROJECT/INSTANCE/TABLE is required")
	}
	if budget <= 0 {
		return cli.Usagef("--retry-budget must be positive")
	}
	opts := bigtable.Options{OpenBudget: budget}
	if err := opts.ParseTable(table); err != nil {
		return cli.Usagef("--bigtable: %v", err)
	}
	err := bigtable.Init(ctx, opts)
	var ruleErr *bigtable.GCRuleError
	if errors.As(err, &ruleErr) && fix {
		removed, rerr := bigtable.RemoveGCRule(ctx, opts)
		if rerr != nil {
			return rerr
		}
		fmt.Fprintf(stdout, "removed the garbage-collection rule %s from family %q of table %s (cells it deleted before are gone)\n", removed, bigtable.Family, table)
		err = bigtable.Init(ctx, opts)
	}
	if errors.As(err, &ruleErr) {
		return fmt.Errorf("family %q of table %s has the garbage-collection rule %s, which deletes live data here "+
			"(cell times are protocol timestamps, instants in 1970: an age rule deletes every cell, a version rule versions still read); "+
			"nothing was changed. Remove it with: percolator init --bigtable %s --fix (or: cbt -project %s -instance %s setgcpolicy %s %s never)",
			bigtable.Family, table, ruleErr.Rule, table, ruleErr.Project, ruleErr.Instance, ruleErr.Table, bigtable.Family)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "table %s ready (family %q, no garbage-collection rule)\n", table, bigtable.Family)
	return nil
}
