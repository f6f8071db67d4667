package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/view"
	"github.com/seed-992972ee/percolator/graph"
)

// graphFlags are the flags of every graph command: the target and the
// label.
type graphFlags struct {
	tg    cli.Target
	label string
}

// graphCmd is `graph`: S2Graph's edges on the database (package graph),
// its commands load, insert, delete, query, degree and check.
func graphCmd() *cobra.Command {
	var gf graphFlags
	c := &cobra.Command{
		Use:   "graph <command>",
		Short: "S2Graph's edges: load, insert, delete, query, degree, check",
		Long: `S2Graph's edges on the database: load a dependency graph, insert and delete
edges, query a vertex's neighbours in index order or count them, and check
every index and degree against the edges.`,
		Example: `  percolator graph load --dir D
  percolator graph query --dir D --in libc6 --limit 10`,
		Args: cobra.ArbitraryArgs,
		RunE: cli.GroupRun,
	}
	gf.tg.Register(c.PersistentFlags(), "database directory (created by graph load)")
	c.PersistentFlags().StringVar(&gf.label, "label", "depends", "the edges' label")
	c.AddCommand(graphLoadCmd(&gf), graphMutateCmd(&gf, "insert"), graphMutateCmd(&gf, "delete"),
		graphQueryCmd(&gf), graphDegreeCmd(&gf), graphCheckCmd(&gf))
	return c
}

// open opens the target's database (an embedded one created if create)
// and the graph on its store.
func (gf *graphFlags) open(ctx context.Context, create bool) (*graph.Graph, func(), error) {
	if err := gf.tg.Validate(); err != nil {
		return nil, nil, err
	}
	db, err := gf.tg.Open(ctx, create && gf.tg.Dir != "")
	if err != nil {
		return nil, nil, err
	}
	return graph.New(db.Store(), graph.Options{DB: db}), func() { _ = db.Close() }, nil
}

// graphMutateCmd is `graph insert SRC TGT [PROP=VALUE...]` or `graph
// delete SRC TGT`.
func graphMutateCmd(gf *graphFlags, op string) *cobra.Command {
	c := &cobra.Command{
		Use:     "insert SRC TGT [PROP=VALUE...]",
		Short:   "insert (or update) an edge",
		Example: "  percolator graph insert --dir D mypkg libc6 kind=Depends constraint='>= 2.34'",
		Args:    cli.ArgsBetween(2, -1, "SRC and TGT, then PROP=VALUE pairs"),
	}
	if op == "delete" {
		c.Use, c.Short, c.Example = "delete SRC TGT", "delete an edge", "  percolator graph delete --dir D mypkg libc6"
		c.Args = cli.ArgsBetween(2, 2, "SRC and TGT")
	}
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx := c.Context()
		g, closeDB, err := gf.open(ctx, false)
		if err != nil {
			return err
		}
		defer closeDB()
		return graphMutate(ctx, g, op, gf.label, args, c.OutOrStdout())
	}
	return c
}

// vertexFlags are query's and degree's --out V and --in V.
type vertexFlags struct{ out, in string }

func (v *vertexFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&v.out, "out", "", "the vertex whose out-edges (it is their source)")
	c.Flags().StringVar(&v.in, "in", "", "the vertex whose in-edges (it is their target)")
}

// vertex is the vertex and direction asked for: exactly one of them.
func (v *vertexFlags) vertex() (string, byte, error) {
	switch {
	case (v.out == "") == (v.in == ""):
		return "", 0, cli.Usagef("exactly one of --out V and --in V")
	case v.out != "":
		return v.out, graph.Out, nil
	}
	return v.in, graph.In, nil
}

// graphQueryCmd is `graph query (--out V | --in V)`.
func graphQueryCmd(gf *graphFlags) *cobra.Command {
	var v vertexFlags
	var index string
	var limit, offset int
	var jsonOut bool
	c := &cobra.Command{
		Use:     "query (--out V | --in V)",
		Short:   "neighbours in index order, one per line",
		Example: "  percolator graph query --dir D --in libc6 --offset 2 --limit 3\n  percolator graph query --dir D --out mypkg --index by_kind --json",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			vertex, dir, err := v.vertex()
			if err != nil {
				return err
			}
			if limit < 0 || offset < 0 {
				return cli.Usagef("--limit and --offset must not be negative")
			}
			ctx := c.Context()
			g, closeDB, err := gf.open(ctx, false)
			if err != nil {
				return err
			}
			defer closeDB()
			es, err := g.Neighbors(ctx, graph.Query{Label: gf.label, Vertex: vertex, Dir: dir, Index: index, Limit: limit, Offset: offset})
			if err != nil {
				return err
			}
			return view.Edges(c.OutOrStdout(), es, dir, jsonOut)
		},
	}
	v.register(c)
	c.Flags().StringVar(&index, "index", "", "the index to read (default the label's first)")
	c.Flags().IntVar(&limit, "limit", 0, "at most this many (0: all)")
	c.Flags().IntVar(&offset, "offset", 0, "skip this many")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the edges as JSON")
	return c
}

// graphDegreeCmd is `graph degree (--out V | --in V)`.
func graphDegreeCmd(gf *graphFlags) *cobra.Command {
	var v vertexFlags
	var jsonOut bool
	c := &cobra.Command{
		Use:     "degree (--out V | --in V)",
		Short:   "the number of edges",
		Example: "  percolator graph degree --dir D --in libc6",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			vertex, dir, err := v.vertex()
			if err != nil {
				return err
			}
			ctx := c.Context()
			g, closeDB, err := gf.open(ctx, false)
			if err != nil {
				return err
			}
			defer closeDB()
			n, err := g.Degree(ctx, gf.label, vertex, dir)
			if err != nil {
				return err
			}
			return view.Degree(c.OutOrStdout(), gf.label, vertex, dir, n, jsonOut)
		},
	}
	v.register(c)
	c.Flags().BoolVar(&jsonOut, "json", false, "print the degree, vertex, direction and label as JSON")
	return c
}

// graphCheckCmd is `graph check`: every index and degree against the
// snapshot edges; exit 1 on a mismatch.
func graphCheckCmd(gf *graphFlags) *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:     "check",
		Short:   "every index and degree against the snapshot edges; exit 1 on a mismatch",
		Example: "  percolator graph check --dir D",
		Args:    cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, w := c.Context(), c.OutOrStdout()
			g, closeDB, err := gf.open(ctx, false)
			if err != nil {
				return err
			}
			defer closeDB()
			rep, err := g.Check(ctx, gf.label)
			if err != nil {
				return err
			}
			if err := view.GraphCheck(w, rep, jsonOut); err != nil {
				return err
			}
			if len(rep.Mismatches) > 0 {
				return fmt.Errorf("%w: %d mismatches", cli.ErrFailed, len(rep.Mismatches))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the counts and mismatches as JSON")
	return c
}

// graphMutate inserts or deletes one edge; insert's PROP=VALUE pairs are
// typed by the label.
func graphMutate(ctx context.Context, g *graph.Graph, cmd, label string, args []string, w io.Writer) error {
	l, err := g.Label(ctx, label)
	if err != nil {
		return err
	}
	m := graph.Mutation{Op: graph.Insert, Label: label, Src: args[0], Tgt: args[1], TS: time.Now().UnixMicro(), Props: graph.Props{}}
	if cmd == "delete" {
		m.Op, m.Props = graph.Delete, nil
	}
	for _, kv := range args[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cli.Usagef("graph insert: %q is not PROP=VALUE", kv)
		}
		switch l.Props[k] {
		case graph.Int:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return cli.Usagef("graph insert: %s is an int: %q", k, v)
			}
			m.Props[k] = graph.IntValue(n)
		case graph.Float:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return cli.Usagef("graph insert: %s is a float: %q", k, v)
			}
			m.Props[k] = graph.FloatValue(f)
		default:
			m.Props[k] = graph.StringValue(v) // an undeclared one is refused by Mutate
		}
	}
	r, err := g.Mutate(ctx, m)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, view.MutateOutcome(m, r))
	return nil
}
