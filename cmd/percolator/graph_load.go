package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/graph"
	"github.com/seed-992972ee/percolator/workload"
)

// graphLoadCmd is `graph load [FILE]`: create the label (unless it
// exists) and insert every edge of a dependency file.
func graphLoadCmd(gf *graphFlags) *cobra.Command {
	var consistency string
	var workers, limit int
	var jsonOut bool
	c := &cobra.Command{
		Use:   "load [FILE]",
		Short: "ingest a dependency graph (default testdata/debian-deps.tsv.gz)",
		Long: `Ingest a dependency graph: lines of package, dependency, kind and version
constraint, tab-separated (# comments; gzipped if the name ends in .gz),
into the label, created with --consistency unless it exists.`,
		Example: "  percolator graph load --dir D\n  percolator graph load --dir D --label deps2 --consistency txn deps.tsv",
		Args:    cli.ArgsBetween(0, 1, "at most one FILE"),
		RunE: func(c *cobra.Command, args []string) error {
			con := graph.Consistency(consistency)
			switch {
			case workers < 1:
				return cli.Usagef("--workers must be at least 1")
			case limit < 0:
				return cli.Usagef("--limit must not be negative")
			case con != graph.Strong && con != graph.Weak && con != graph.Txn:
				return cli.Usagef("--consistency %q (strong, weak or txn)", consistency)
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			ctx := c.Context()
			g, closeDB, err := gf.open(ctx, true)
			if err != nil {
				return err
			}
			defer closeDB()
			opts := workload.DepsOptions{Label: gf.label, Consistency: con, RequireConsistency: c.Flags().Changed("consistency"), Workers: workers}
			return graphLoad(ctx, g, file, limit, opts, jsonOut, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&consistency, "consistency", "strong", "the label's consistency when load creates it: strong, weak or txn")
	c.Flags().IntVar(&workers, "workers", 16, "concurrent mutations")
	c.Flags().IntVar(&limit, "limit", 0, "load at most this many edges (0: all)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the summary as JSON")
	return c
}

// graphLoad reads the dependency file (the shipped one if file is "")
// and loads its first limit edges (all if 0), showing progress.
func graphLoad(ctx context.Context, g *graph.Graph, file string, limit int, opts workload.DepsOptions, jsonOut bool, stdout, stderr io.Writer) error {
	if file == "" {
		var err error
		if file, err = cli.FindTestdata("debian-deps.tsv.gz"); err != nil {
			return err
		}
	}
	prog := progress.New(ctx, stderr, false)
	started := false
	edges, err := workload.ReadDepsProgress(ctx, file, func(done, size int64) {
		if !started {
			started = true
			prog.Start("reading: bytes of "+filepath.Base(file), size)
		}
		prog.Set(done)
	})
	prog.End(err)
	if err != nil {
		return err
	}
	if limit > 0 && limit < len(edges) {
		edges = edges[:limit]
	}
	prog.Start("loading: edges inserted", int64(len(edges)))
	opts.Progress = func(done, _ int64) { prog.Set(done) }
	start := time.Now()
	l, err := workload.LoadDeps(ctx, g, edges, opts)
	prog.End(err)
	if errors.Is(err, workload.ErrConsistency) {
		return cli.Usagef("label %s exists with consistency %s, not %s (a label's consistency is fixed when it is created; use another --label)", l.Name, l.Consistency, opts.Consistency)
	}
	if err != nil {
		return err
	}
	sum := view.GraphLoad{Edges: len(edges), File: file, Label: l.Name, Consistency: string(l.Consistency), Elapsed: time.Since(start)}
	return sum.Print(stdout, jsonOut)
}
