package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/rpc"
)

// percolator worker: the index job's observers in an extra process, on a
// server's database, until a signal; with --drain, until nothing is left.
// Several workers (and an index run) keep one index at once.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("worker", stderr)
	var tg target
	tg.register(fs, "not allowed: a worker shares a database with other processes (--server, or --bigtable with --etcd)")
	scanners := fs.Int("scanners", 4, "scanner threads running the observers")
	drain := fs.Bool("drain", false, "exit once no notification is left, instead of at a signal")
	random := fs.Bool("random-scan", false, "scan the whole notify keyspace from random places, instead of splitting it with the other workers (with --etcd)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case tg.dir != "":
		return usagef("a worker runs beside other processes: use --server or --bigtable with --etcd (an embedded --dir has one process; run index there)")
	case *scanners < 1:
		return usagef("--scanners must be at least 1")
	}
	if err := tg.validate(); err != nil {
		return err
	}
	db, err := tg.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := docindex.Register(ctx, db); err != nil {
		return err
	}
	how := "scanning from random places"
	if tg.etcd != "" && !*random {
		how = "splitting the notify keyspace with the other workers (etcd membership)"
	}
	fmt.Fprintf(stderr, "percolator worker: running the index observers with %d scanners on %s, %s\n", *scanners, tg.String(), how)
	rctx := ctx
	if tg.server != "" {
		// The run is one operation of the server connection: its scanners
		// call the server at least every 200ms (WorkerOptions.MaxIdle), so
		// a server that answers none of them for the retry budget is gone,
		// and every call then fails at once, counters flushed at the end
		// included: the worker stops with the error naming the server,
		// instead of retrying each remaining call for a budget of its own.
		rctx = rpc.WithOperation(ctx)
	}
	rep, err := db.RunWorkers(rctx, percolator.WorkerOptions{Scanners: *scanners, Drain: *drain, Unpartitioned: *random})
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return errDrained
	}
	if err != nil {
		return err
	}
	for _, u := range rep.Unhandled {
		fmt.Fprintf(stdout, "warning: %d notified cells left for observer %s (column %s), which this program does not run\n", u.Pending, u.Observer, u.Column)
	}
	return nil
}
