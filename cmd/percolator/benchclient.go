package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/bench"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// benchClientCmd is `bench-client` (hidden): a client process of bench
// --server's oracle figure, printing what bench.RunClient measured.
func benchClientCmd() *cobra.Command {
	var tg cli.Target
	var o bench.ClientOptions
	var startNS int64
	c := &cobra.Command{
		Use:    "bench-client",
		Short:  "a client process of bench --server's oracle figure",
		Hidden: true,
		Args:   cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Start = time.Unix(0, startNS)
			tok, err := cli.ReadToken(tg.TokenFile)
			if err != nil {
				return err
			}
			ctx := c.Context()
			conn, err := bench.ServerTarget{Addr: tg.Server, Token: tok, CAFile: tg.TLSCA}.Dial(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			res, err := bench.RunClient(ctx, conn, o)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), res)
			return nil
		},
	}
	fs := c.Flags()
	tg.Register(fs, "unused")
	fs.StringVar(&o.Mode, "mode", "oracle", "oracle or ping")
	fs.IntVar(&o.Goroutines, "goroutines", 64, "concurrent callers")
	fs.DurationVar(&o.Duration, "duration", time.Second, "how long")
	fs.Int64Var(&startNS, "start", 0, "start at this Unix time (ns)")
	return c
}
