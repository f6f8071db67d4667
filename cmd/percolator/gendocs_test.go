package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocsCurrent: docs/cli holds what gen-docs writes now, file for
// file: a command, flag or help text changed without regenerating the
// reference fails here, naming the stale files and the command that
// regenerates them. Generating twice gives the same files (no date).
func TestDocsCurrent(t *testing.T) {
	fresh := t.TempDir()
	if n, err := genDocs(fresh); err != nil || n == 0 {
		t.Fatalf("gen-docs: %d files, %v", n, err)
	}
	again, err := renderDocs()
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join("..", "..", filepath.FromSlash(docsDir))
	var stale []string
	for name, body := range again {
		if b, err := os.ReadFile(filepath.Join(fresh, name)); err != nil || !bytes.Equal(b, body) {
			t.Errorf("gen-docs wrote %s otherwise the second time: not reproducible", name)
		}
		if b, err := os.ReadFile(filepath.Join(kept, name)); err != nil || !bytes.Equal(b, body) {
			stale = append(stale, name)
		}
	}
	old, _ := filepath.Glob(filepath.Join(kept, "percolator*.md"))
	for _, p := range old {
		if _, ok := again[filepath.Base(p)]; !ok {
			stale = append(stale, filepath.Base(p)+" (no such command)")
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		t.Errorf("%s is stale: %s\nregenerate it from the repository's root with:\n\t%s", docsDir, strings.Join(stale, ", "), regenerateDocs)
	}
}

// TestGenDocsCommand: gen-docs writes into the directory it is given and
// removes there only the reference of commands that no longer exist.
func TestGenDocsCommand(t *testing.T) {
	dir := t.TempDir()
	gone, other := filepath.Join(dir, "percolator_gone.md"), filepath.Join(dir, "notes.md")
	for _, p := range []string{gone, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := mustRun(t, 0, "gen-docs", dir)
	if !strings.HasSuffix(out, " files in "+dir+"\n") {
		t.Fatalf("gen-docs: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "percolator_queue_push.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("the reference of a command that is gone stays: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file gen-docs did not write went: %v", err)
	}
}
