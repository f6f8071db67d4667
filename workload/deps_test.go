package workload

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/graph"
)

const depsFile = "# package, dependency, kind, constraint\n" +
	"app\tlibc6\tDepends\t>= 2.34\n" +
	"app\tzlib1g\n" +
	"\n" +
	"tool\tlibc6\tRecommends\n"

// TestReadDeps: plain and gzipped files, comments and blank lines
// skipped, the kind defaulting to Depends; a line without a dependency
// is an error naming it.
func TestReadDeps(t *testing.T) {
	dir := t.TempDir()
	plain, gz := filepath.Join(dir, "deps.tsv"), filepath.Join(dir, "deps.tsv.gz")
	if err := os.WriteFile(plain, []byte(depsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(gz)
	if err != nil {
		t.Fatal(err)
	}
	z := gzip.NewWriter(f)
	_, _ = z.Write([]byte(depsFile))
	if err := errors.Join(z.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	want := []DepEdge{{"app", "libc6", "Depends", ">= 2.34"}, {"app", "zlib1g", "Depends", ""}, {"tool", "libc6", "Recommends", ""}}
	for _, p := range []string{plain, gz} {
		got, err := ReadDeps(p)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ReadDeps(%s) = %v, %v", p, got, err)
		}
	}
	if err := os.WriteFile(plain, []byte("app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDeps(plain); err == nil {
		t.Fatal("a line without a dependency was read")
	}
	long := "app\t" + strings.Repeat("x", bufio.MaxScanTokenSize) + "\n"
	if err := os.WriteFile(plain, []byte("a\tb\n"+long), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDeps(plain); err == nil || err.Error() != plain+":2: line longer than 65536 bytes" {
		t.Fatalf("a line past the scanner's limit: %v", err)
	}
}

// TestLoadDeps: every edge is inserted, each reported once; a second load
// into the existing label keeps its consistency, unless told to require
// another (ErrConsistency).
func TestLoadDeps(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	g := graph.New(db.Store(), graph.Options{DB: db})
	edges := []DepEdge{{"app", "libc6", "Depends", ""}, {"app", "zlib1g", "Depends", ""}, {"tool", "libc6", "Recommends", ""}}
	var reported atomic.Int64
	l, err := LoadDeps(ctx, g, edges, DepsOptions{Label: "deps", Consistency: graph.Weak, Workers: 2,
		Progress: func(done, total int64) { reported.Add(1) }})
	if err != nil || l.Consistency != graph.Weak || reported.Load() != 3 {
		t.Fatalf("LoadDeps: %+v, %v, %d reported", l, err, reported.Load())
	}
	if n, err := g.Degree(ctx, "deps", "libc6", graph.In); err != nil || n != 2 {
		t.Fatalf("in-degree of libc6: %d, %v", n, err)
	}
	if l, err := LoadDeps(ctx, g, edges, DepsOptions{Label: "deps", Consistency: graph.Strong}); err != nil || l.Consistency != graph.Weak {
		t.Fatalf("load into the existing label: %+v, %v", l, err)
	}
	_, err = LoadDeps(ctx, g, edges, DepsOptions{Label: "deps", Consistency: graph.Strong, RequireConsistency: true})
	if !errors.Is(err, ErrConsistency) {
		t.Fatalf("load requiring another consistency: %v", err)
	}
}
