package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
)

// devclusterCmd is `devcluster --dir D`: the Bigtable emulator and one
// etcd member on local ports, for trying the distributed commands on one
// machine.
func devclusterCmd() *cobra.Command {
	var dir, btAddr, etcdAddr string
	c := &cobra.Command{
		Use:     "devcluster",
		Short:   "the Bigtable emulator and one etcd member on local ports, for trying the distributed commands",
		Example: "  percolator devcluster --dir /tmp/dev",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				return cli.Usagef("--dir is required")
			}
			if err := cli.RequireLoopback(btAddr); err != nil {
				return err
			}
			if etcdAddr != "" {
				if err := cli.RequireLoopback(etcdAddr); err != nil {
					return err
				}
			}
			return runDevcluster(c.Context(), dir, btAddr, etcdAddr, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory for etcd's data (the Bigtable emulator keeps its data in memory)")
	c.Flags().StringVar(&btAddr, "bigtable-listen", "127.0.0.1:0", "address of the Bigtable emulator")
	c.Flags().StringVar(&etcdAddr, "etcd-listen", "", "client address of etcd (default: a free port on 127.0.0.1)")
	return c
}

// runDevcluster runs the emulator and the etcd member until a signal.
func runDevcluster(ctx context.Context, dir, btAddr, etcdAddr string, stdout, stderr io.Writer) error {
	dev, err := cluster.StartDev(ctx, cluster.DevOptions{Dir: dir, BigtableAddr: btAddr, EtcdAddr: etcdAddr})
	if err != nil {
		return err
	}
	defer dev.Close()
	endpoints, devTable := strings.Join(dev.Endpoints(), ","), cluster.DevTable
	fmt.Fprintf(stdout, `devcluster: for trying and testing only. The Bigtable emulator keeps its
data in memory (gone when this stops) and etcd has a single member.

Set this in every shell that runs a percolator command:
  export BIGTABLE_EMULATOR_HOST=%s
and pass these flags:
  --bigtable %s --etcd %s

For example (the oracle reads the observer registry version from the table,
so that commits need not):
  percolator oracle --etcd %s --bigtable %s --listen 127.0.0.1:7431 &
  percolator bank --bigtable %s --etcd %s --duration 10s

Stop with Ctrl-C.
`, dev.EmulatorAddr(), devTable, endpoints, endpoints, devTable, devTable, endpoints)
	select {
	case <-ctx.Done():
	case err := <-dev.Err():
		return fmt.Errorf("etcd: %w", err)
	}
	fmt.Fprintln(stderr, "devcluster: stopping")
	// Stopped by a signal: main's exit status is 130 or 143 (devcluster
	// is not a command that drains and exits 0).
	return context.Cause(ctx)
}
