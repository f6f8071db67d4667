package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/graph"
)

// depends is the label `graph load` fills: a package's dependency, with
// its kind and version constraint, ordered by kind in the index.
func dependsLabel(name string, c graph.Consistency) graph.Label {
	return graph.Label{
		Name:        name,
		Props:       map[string]graph.Type{"kind": graph.String, "constraint": graph.String},
		Indexes:     []graph.Index{{Name: "by_kind", Props: []string{"kind"}}},
		Consistency: c,
	}
}

// graphLoadCmd is `graph load [FILE]`: create the label (unless it
// exists) and insert every edge of a dependency file.
func graphLoadCmd(gf *graphFlags) *cobra.Command {
	var consistency string
	var workers, limit int
	c := &cobra.Command{
		Use:   "load [FILE]",
		Short: "ingest a dependency graph (default testdata/debian-deps.tsv.gz)",
		Long: `Ingest a dependency graph: lines of package, dependency, kind and version
constraint, tab-separated (# comments; gzipped if the name ends in .gz),
into the label, created with --consistency unless it exists.`,
		Example: "  percolator graph load --dir D\n  percolator graph load --dir D --label deps2 --consistency txn deps.tsv",
		Args:    argsBetween(0, 1, "at most one FILE"),
		RunE: func(c *cobra.Command, args []string) error {
			con := graph.Consistency(consistency)
			switch {
			case workers < 1:
				return usagef("--workers must be at least 1")
			case limit < 0:
				return usagef("--limit must not be negative")
			case con != graph.Strong && con != graph.Weak && con != graph.Txn:
				return usagef("--consistency %q (strong, weak or txn)", consistency)
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
			return graphLoad(ctx, g, dependsLabel(gf.label, con), c.Flags().Changed("consistency"), file, workers, limit, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&consistency, "consistency", "strong", "the label's consistency when load creates it: strong, weak or txn")
	c.Flags().IntVar(&workers, "workers", 16, "concurrent mutations")
	c.Flags().IntVar(&limit, "limit", 0, "load at most this many edges (0: all)")
	return c
}

// findTestdata finds testdata/name from the working directory up, or next
// to this source file (go run from anywhere): the shipped corpus and
// graph.
func findTestdata(name string) (string, error) {
	var candidates []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			candidates = append(candidates, filepath.Join(d, "testdata", name))
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		candidates = append(candidates, filepath.Join(filepath.Dir(file), "..", "..", "testdata", name))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", usagef("cannot find testdata/%s from here: give FILE", name)
}

// depEdge is one line of a dependency file.
type depEdge struct{ src, tgt, kind, constraint string }

// readDeps reads a dependency file (gzipped if its name ends in .gz):
// tab-separated package, dependency, kind, constraint; # comments.
func readDeps(path string) ([]depEdge, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	var out []depEdge
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := strings.Split(line, "\t")
		if len(p) < 2 || p[0] == "" || p[1] == "" {
			return nil, fmt.Errorf("%s:%d: want package<TAB>dependency[<TAB>kind[<TAB>constraint]], got %q", path, n, line)
		}
		for len(p) < 4 {
			p = append(p, "")
		}
		if p[2] == "" {
			p[2] = "Depends"
		}
		out = append(out, depEdge{p[0], p[1], p[2], p[3]})
	}
	return out, sc.Err()
}

// graphLoad creates the label (if absent) and inserts every edge, with
// workers at once and a progress bar.
func graphLoad(ctx context.Context, g *graph.Graph, l graph.Label, explicit bool, file string, workers, limit int, stdout, stderr io.Writer) error {
	if file == "" {
		var err error
		if file, err = findTestdata("debian-deps.tsv.gz"); err != nil {
			return err
		}
	}
	edges, err := readDeps(file)
	if err != nil {
		return err
	}
	if limit > 0 && limit < len(edges) {
		edges = edges[:limit]
	}
	if err := g.CreateLabel(ctx, l); err != nil {
		if !errors.Is(err, graph.ErrInvalidArgument) {
			return err
		}
		old, lerr := g.Label(ctx, l.Name)
		if lerr != nil {
			return err
		}
		if explicit && old.Consistency != l.Consistency {
			return usagef("graph load: label %s exists with consistency %s, not %s (a label's consistency is fixed when it is created; use another --label)", l.Name, old.Consistency, l.Consistency)
		}
		l = *old // load into the label as it was created
	}
	prog := newProgress(stderr, false)
	start := time.Now()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	ts := time.Now().UnixMicro()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(edges) || ctx.Err() != nil {
					return
				}
				e := edges[i]
				_, err := g.Mutate(ctx, graph.Mutation{Op: graph.Insert, Label: l.Name, Src: e.src, Tgt: e.tgt, TS: ts,
					Props: graph.Props{"kind": graph.StringValue(e.kind), "constraint": graph.StringValue(e.constraint)}})
				if err != nil {
					errc <- fmt.Errorf("%s -> %s: %w", e.src, e.tgt, err)
					return
				}
				prog.Show("loading edges", done.Add(1), int64(len(edges)))
			}
		}()
	}
	wg.Wait()
	prog.End()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Fprintf(stdout, "loaded %d edges from %s into label %s (%s) in %s: %.0f edges/s\n", len(edges), filepath.Base(file), l.Name, l.Consistency, d.Round(time.Millisecond), float64(len(edges))/d.Seconds())
	return nil
}
