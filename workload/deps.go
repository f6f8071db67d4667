package workload

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-992972ee/percolator/graph"
)

// ErrConsistency: the label exists with another consistency than the
// one LoadDeps was told to require (a label's consistency is fixed when
// it is created).
var ErrConsistency = errors.New("workload: the label exists with another consistency")

// DepEdge is one line of a dependency file: a package, a dependency, the
// kind of dependency (Depends, Recommends, ...) and its version
// constraint.
type DepEdge struct{ Package, Dependency, Kind, Constraint string }

// countingReader tells read the bytes read through it so far, of size,
// and fails with ctx's error once ctx ends.
type countingReader struct {
	ctx        context.Context
	r          io.Reader
	done, size int64
	read       func(done, size int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	if n > 0 {
		c.done += int64(n)
		c.read(c.done, c.size)
	}
	return n, err
}

// ReadDeps reads a dependency file (gzipped if its name ends in .gz):
// lines of package, dependency, kind and constraint, tab-separated, the
// last two optional (the kind defaults to Depends); blank lines and #
// comments are skipped.
func ReadDeps(path string) ([]DepEdge, error) {
	return ReadDepsProgress(context.Background(), path, nil)
}

// ReadDepsProgress is ReadDeps telling read (if set) the bytes of the file
// read so far, of its size: 0 before the first, then after each read. It
// stops with ctx's error once ctx ends.
func ReadDepsProgress(ctx context.Context, path string, read func(done, size int64)) ([]DepEdge, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if read != nil {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		read(0, fi.Size())
		r = &countingReader{ctx: ctx, r: f, size: fi.Size(), read: read}
	}
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	var out []DepEdge
	sc := bufio.NewScanner(r)
	n := 1
	for ; sc.Scan(); n++ {
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
		out = append(out, DepEdge{p[0], p[1], p[2], p[3]})
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s:%d: line longer than %d bytes", path, n, bufio.MaxScanTokenSize)
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// DepsLabel is the label a dependency graph fills: a package's
// dependencies, with their kind and constraint, ordered by kind in the
// index by_kind.
func DepsLabel(name string, c graph.Consistency) graph.Label {
	return graph.Label{
		Name:        name,
		Props:       map[string]graph.Type{"kind": graph.String, "constraint": graph.String},
		Indexes:     []graph.Index{{Name: "by_kind", Props: []string{"kind"}}},
		Consistency: c,
	}
}

// DepsOptions configures LoadDeps.
type DepsOptions struct {
	// Label is the label to load (created as DepsLabel unless it exists).
	Label string
	// Consistency is the label's consistency when LoadDeps creates it;
	// an existing label is loaded as it was created, unless
	// RequireConsistency and it has another (ErrConsistency).
	Consistency        graph.Consistency
	RequireConsistency bool
	// Workers insert edges concurrently (0: 16).
	Workers int
	// Progress, if set, is told each inserted edge: done of total. It is
	// called from the workers, concurrently.
	Progress func(done, total int64)
}

// LoadDeps inserts every edge into the label (creating it unless it
// exists) with opts.Workers at once, every insert at one version, and
// returns the label as it loaded it. The first insert that fails stops
// the others and is the error.
func LoadDeps(ctx context.Context, g *graph.Graph, edges []DepEdge, opts DepsOptions) (graph.Label, error) {
	if opts.Workers == 0 {
		opts.Workers = 16
	}
	l, err := depsLabel(ctx, g, opts)
	if err != nil {
		return l, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	ts := time.Now().UnixMicro()
	for range opts.Workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(edges) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				e := edges[i]
				_, err := g.Mutate(ctx, graph.Mutation{Op: graph.Insert, Label: l.Name, Src: e.Package, Tgt: e.Dependency, TS: ts,
					Props: graph.Props{"kind": graph.StringValue(e.Kind), "constraint": graph.StringValue(e.Constraint)}})
				if err != nil {
					cancel(fmt.Errorf("%s -> %s: %w", e.Package, e.Dependency, err))
					return
				}
				if n := done.Add(1); opts.Progress != nil {
					opts.Progress(n, int64(len(edges)))
				}
			}
		})
	}
	wg.Wait()
	return l, context.Cause(ctx)
}

// depsLabel creates the label, or returns it as it was created.
func depsLabel(ctx context.Context, g *graph.Graph, opts DepsOptions) (graph.Label, error) {
	l := DepsLabel(opts.Label, opts.Consistency)
	err := g.CreateLabel(ctx, l)
	if err == nil || !errors.Is(err, graph.ErrInvalidArgument) {
		return l, err
	}
	old, lerr := g.Label(ctx, l.Name)
	if lerr != nil {
		return l, err // the label's definition was refused
	}
	if opts.RequireConsistency && old.Consistency != l.Consistency {
		return *old, fmt.Errorf("%w: label %s is %s, not %s", ErrConsistency, l.Name, old.Consistency, l.Consistency)
	}
	return *old, nil
}
