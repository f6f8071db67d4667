package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/statuspage"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/rpc"
)

// workerCmd is `worker`: the index job's observers in an extra process,
// on a server's database, until a signal; with --drain, until nothing is
// left. Several workers (and an index run) keep one index at once.
func workerCmd() *cobra.Command {
	var tg cli.Target
	var scanners int
	var drain, random bool
	var web cli.HTTPFlags
	c := &cobra.Command{
		Use:     "worker",
		Short:   "run the index job's observers in an extra process (--server)",
		Example: "  percolator worker --server 127.0.0.1:7420 --scanners 4\n  percolator worker --bigtable P/I/T --etcd http://127.0.0.1:2379 --drain",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case tg.Dir != "":
				return cli.Usagef("a worker runs beside other processes: use --server or --bigtable with --etcd (an embedded --dir has one process; run index there)")
			case scanners < 1:
				return cli.Usagef("--scanners must be at least 1")
			}
			if err := tg.Validate(); err != nil {
				return err
			}
			if err := web.CheckLoopback("a worker"); err != nil {
				return err
			}
			return runWorker(c.Context(), &tg, &web, percolator.WorkerOptions{Scanners: scanners, Drain: drain, Unpartitioned: random}, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fs := c.Flags()
	tg.Register(fs, "not allowed: a worker shares a database with other processes (--server, or --bigtable with --etcd)")
	fs.IntVar(&scanners, "scanners", 4, "scanner threads running the observers")
	fs.BoolVar(&drain, "drain", false, "exit once no notification is left, instead of at a signal")
	web.Register(fs, cli.LoopbackOnly)
	fs.BoolVar(&random, "random-scan", false, "scan the whole notify keyspace from random places, instead of splitting it with the other workers (with --etcd)")
	return c
}

// runWorker runs the observers on the target's database.
func runWorker(ctx context.Context, tg *cli.Target, web *cli.HTTPFlags, opts percolator.WorkerOptions, stdout, stderr io.Writer) error {
	tg.RunGC = true // on Bigtable the workers collect garbage: one at a time, the holder of a lock in etcd
	db, err := tg.Open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := docindex.Register(ctx, db); err != nil {
		return err
	}
	if web.Addr != "" {
		stop, err := startWorkerHTTP(ctx, tg, web, db, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	how := "scanning from random places"
	if tg.Etcd != "" && !opts.Unpartitioned {
		how = "splitting the notify keyspace with the other workers (etcd membership)"
	}
	fmt.Fprintf(stderr, "percolator worker: running the index observers with %d scanners on %s, %s\n", opts.Scanners, tg.String(), how)
	rctx := ctx
	if tg.Server != "" {
		// The run is one operation of the server connection: its scanners
		// call the server at least every 200ms (WorkerOptions.MaxIdle), so
		// a server that answers none of them for the retry budget is gone,
		// and every call then fails at once, counters flushed at the end
		// included: the worker stops with the error naming the server,
		// instead of retrying each remaining call for a budget of its own.
		rctx = rpc.WithOperation(ctx)
	}
	rep, err := db.RunWorkers(rctx, opts)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return cli.ErrDrained
	}
	if err != nil {
		return err
	}
	for _, u := range rep.Unhandled {
		fmt.Fprintf(stdout, "warning: %d notified cells left for observer %s (column %s), which this program does not run\n", u.Pending, u.Observer, u.Column)
	}
	return nil
}

// startWorkerHTTP serves the worker's status page and metrics on --http
// (loopback only).
func startWorkerHTTP(ctx context.Context, tg *cli.Target, web *cli.HTTPFlags, db *percolator.DB, stderr io.Writer) (stop func(), err error) {
	var orc *statuspage.Oracle
	if tg.Server != "" {
		orc = &statuspage.Oracle{Leader: "The server at " + tg.Server + " hands out the timestamps."}
	}
	read := func(ctx context.Context) statuspage.Snapshot {
		st, err := observerStatus(ctx, db)
		return statuspage.Snapshot{Observers: st, ObserversErr: err, Oracle: orc}
	}
	h := statusHTTP{flags: web, metrics: processMetrics(), log: slog.New(slog.NewTextHandler(stderr, nil)),
		page: statuspage.Options{Process: "worker", About: "on " + tg.String(), Read: read}}
	return h.start(ctx, nil)
}
