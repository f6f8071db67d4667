package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

const graphUsage = `usage: percolator graph COMMAND [flags] (--dir D | --server ADDR | --bigtable P/I/T --etcd E)
  load [FILE]                 ingest a dependency graph (default testdata/debian-deps.tsv.gz)
  insert SRC TGT [PROP=VALUE...]  insert (or update) an edge
  delete SRC TGT              delete an edge
  query (--out V | --in V)    neighbours in index order, one per line
  degree (--out V | --in V)   the number of edges
  check                       every index and degree against the snapshot edges; exit 1 on a mismatch
flags of every command: --label (default depends)`

// percolator graph: S2Graph's edges on the database (package graph).
func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if done, err := helpOnly("graph", graphUsage, args, stderr); done {
		return err
	}
	cmd, args := args[0], args[1:]
	fs := newFlags("graph "+cmd, stderr)
	var tg target
	tg.register(fs, "database directory (created by graph load)")
	label := fs.String("label", "depends", "the edges' label")
	var (
		consistency, out, in, index *string
		limit, offset, workers      *int
		jsonOut                     *bool
	)
	switch cmd {
	case "load":
		consistency = fs.String("consistency", "strong", "the label's consistency when load creates it: strong, weak or txn")
		workers = fs.Int("workers", 16, "concurrent mutations")
		limit = fs.Int("limit", 0, "load at most this many edges (0: all)")
	case "insert", "delete", "check":
	case "query", "degree":
		out = fs.String("out", "", "the vertex whose out-edges (it is their source)")
		in = fs.String("in", "", "the vertex whose in-edges (it is their target)")
		if cmd == "query" {
			index = fs.String("index", "", "the index to read (default the label's first)")
			limit = fs.Int("limit", 0, "at most this many (0: all)")
			offset = fs.Int("offset", 0, "skip this many")
			jsonOut = fs.Bool("json", false, "print the edges as JSON")
		}
	default:
		fmt.Fprintln(stderr, graphUsage)
		return usagef("graph: unknown command %q", cmd)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := tg.validate(); err != nil {
		return err
	}
	var vertex string
	var dir byte
	if out != nil {
		switch {
		case (*out == "") == (*in == ""):
			return usagef("graph %s: exactly one of --out V and --in V", cmd)
		case *out != "":
			vertex, dir = *out, graph.Out
		default:
			vertex, dir = *in, graph.In
		}
	}
	switch {
	case cmd == "load" && fs.NArg() > 1, (cmd == "query" || cmd == "degree" || cmd == "check") && fs.NArg() > 0:
		return usagef("graph %s: unexpected arguments %q", cmd, fs.Args())
	case cmd == "delete" && fs.NArg() != 2, cmd == "insert" && fs.NArg() < 2:
		return usagef("graph %s: SRC and TGT are required", cmd)
	case limit != nil && *limit < 0, offset != nil && *offset < 0:
		return usagef("graph %s: --limit and --offset must not be negative", cmd)
	case workers != nil && *workers < 1:
		return usagef("graph load: --workers must be at least 1")
	}
	var c graph.Consistency
	if consistency != nil {
		c = graph.Consistency(*consistency)
		if c != graph.Strong && c != graph.Weak && c != graph.Txn {
			return usagef("graph load: --consistency %q (strong, weak or txn)", *consistency)
		}
	}
	db, err := tg.open(ctx, cmd == "load" && tg.dir != "")
	if err != nil {
		return err
	}
	defer db.Close()
	g := graph.New(db.Store(), graph.Options{DB: db})
	switch cmd {
	case "load":
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "consistency" })
		return graphLoad(ctx, g, dependsLabel(*label, c), explicit, fs.Arg(0), *workers, *limit, stdout, stderr)
	case "insert", "delete":
		return graphMutate(ctx, g, cmd, *label, fs.Args(), stdout)
	case "query":
		es, err := g.Neighbors(ctx, graph.Query{Label: *label, Vertex: vertex, Dir: dir, Index: *index, Limit: *limit, Offset: *offset})
		if err != nil {
			return err
		}
		return printEdges(es, dir, *jsonOut, stdout)
	case "degree":
		n, err := g.Degree(ctx, *label, vertex, dir)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, n)
		return nil
	}
	rep, err := g.Check(ctx, *label)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d live edges checked against every index and degree; %d locked by live mutations (skipped), %d expired locks rolled forward\n", rep.Edges, rep.Locked, rep.Repaired)
	for _, m := range rep.Mismatches {
		fmt.Fprintln(stdout, "mismatch:", m)
	}
	if len(rep.Mismatches) > 0 {
		return fmt.Errorf("%w: %d mismatches", errFailed, len(rep.Mismatches))
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// printEdges prints each neighbour on its own line: the other vertex, then
// the properties in name order.
func printEdges(es []graph.Edge, dir byte, jsonOut bool, w io.Writer) error {
	if jsonOut {
		if es == nil {
			es = []graph.Edge{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(es)
	}
	for _, e := range es {
		other := e.Tgt
		if dir == graph.In {
			other = e.Src
		}
		var props []string
		for _, k := range sortedKeys(e.Props) {
			if v := e.Props[k].String(); v != "" {
				props = append(props, k+"="+v)
			}
		}
		fmt.Fprintln(w, strings.TrimSpace(other+"\t"+strings.Join(props, " ")))
	}
	return nil
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
			return usagef("graph insert: %q is not PROP=VALUE", kv)
		}
		switch l.Props[k] {
		case graph.Int:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return usagef("graph insert: %s is an int: %q", k, v)
			}
			m.Props[k] = graph.IntValue(n)
		case graph.Float:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return usagef("graph insert: %s is a float: %q", k, v)
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
	fmt.Fprintln(w, mutateOutcome(m, r))
	return nil
}

// mutateOutcome says what a mutation did, from what it found
// (graph.Result): a delete of an edge that is not there deleted nothing,
// which is not an error (the delete is still recorded at its version, so
// an older insert arriving later is dropped).
func mutateOutcome(m graph.Mutation, r graph.Result) string {
	edge := fmt.Sprintf("%s -%s-> %s", m.Src, m.Label, m.Tgt)
	switch {
	case r.Dropped:
		return "dropped: the edge holds a newer version"
	case m.Op == graph.Delete && !r.Existed:
		return "no edge " + edge + ": nothing deleted"
	case m.Op == graph.Delete:
		return "deleted " + edge
	case r.Existed:
		return "updated " + edge
	}
	return "inserted " + edge
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
