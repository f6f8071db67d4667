package docindex

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator"
)

// TestSelection: without Include a Selection chooses the Indexable files
// (DefaultInclude, the extension in any case); Include replaces that set,
// Exclude removes from it; a glob matches the corpus path or the base
// name, case-sensitively.
func TestSelection(t *testing.T) {
	paths := []string{"a.md", "A.HTML", "d/b.htm", "d/e/c.txt", "main.go", "d/x.go", "d/e/y.go", "Makefile", "d/README", "notes.txt.bak", "f.Go"}
	for _, c := range []struct {
		sel  Selection
		want []string
	}{
		{Selection{}, []string{"a.md", "A.HTML", "d/b.htm", "d/e/c.txt"}},
		{Selection{Include: []string{"*.go"}}, []string{"main.go", "d/x.go", "d/e/y.go"}},
		{Selection{Include: []string{"*.go", "Makefile", "README"}}, []string{"main.go", "d/x.go", "d/e/y.go", "Makefile", "d/README"}},
		{Selection{Include: []string{"d/*"}}, []string{"d/b.htm", "d/x.go", "d/README"}}, // "*" stops at "/"
		{Selection{Include: []string{"*.go"}, Exclude: []string{"d/*.go"}}, []string{"main.go", "d/e/y.go"}},
		{Selection{Exclude: []string{"*.txt", "a.*"}}, []string{"A.HTML", "d/b.htm"}},
		{Selection{Include: []string{"*.bak"}, Exclude: []string{"*"}}, nil},
	} {
		var got []string
		for _, p := range paths {
			if c.sel.Chooses(p) {
				got = append(got, p)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v chooses %q, want %q", c.sel, got, c.want)
		}
	}
	for _, p := range paths { // DefaultInclude is what Indexable chooses
		base := strings.ToLower(path.Base(p))
		if matchAny(DefaultInclude(), base) != Indexable(p) {
			t.Errorf("%q: DefaultInclude and Indexable disagree", p)
		}
	}
}

// TestSelectionValidate: a malformed or empty glob, in Include or
// Exclude, is ErrBadGlob naming it; well-formed ones pass.
func TestSelectionValidate(t *testing.T) {
	for _, g := range []string{"[", "*.[ch", `a\`, "[a-]", ""} {
		for _, sel := range []Selection{{Include: []string{"*.go", g}}, {Exclude: []string{g}}} {
			if err := sel.Validate(); !errors.Is(err, ErrBadGlob) || !strings.Contains(err.Error(), fmt.Sprintf("%q", g)) {
				t.Errorf("%+v: %v, want ErrBadGlob naming %q", sel, err, g)
			}
		}
	}
	if err := (Selection{Include: []string{"*.[ch]", "d/?.go", `\*`}, Exclude: []string{"[^x]*"}}).Validate(); err != nil {
		t.Errorf("good globs: %v", err)
	}
}

// TestListDirSkipped: ListDir lists the files its Selection chooses and
// counts the other regular files by extension ("" for none); hidden names
// are skipped uncounted.
func TestListDirSkipped(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.md": "alpha", "main.go": "package main", "d/x.go": "package d", "Makefile": "all:",
		"d/LICENSE": "MIT", "d/e/y.MD": "upper", ".git/config": "hidden", ".env": "hidden"})
	for _, c := range []struct {
		sel     Selection
		files   []string
		skipped map[string]int
	}{
		{Selection{}, []string{"a.md", "d/e/y.MD"}, map[string]int{".go": 2, "": 2}},
		{Selection{Include: []string{"*.go"}}, []string{"d/x.go", "main.go"}, map[string]int{".md": 1, ".MD": 1, "": 2}},
		{Selection{Exclude: []string{"d/*/*"}}, []string{"a.md"}, map[string]int{".go": 2, "": 2, ".MD": 1}},
	} {
		l, err := ListDir(src, c.sel)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range l.Files {
			got = append(got, f.Path)
		}
		if !slices.Equal(got, c.files) || !maps.Equal(l.Skipped, c.skipped) || len(l.Bad) != 0 {
			t.Errorf("%+v: files %q, skipped %v, bad %v; want %q, %v", c.sel, got, l.Skipped, l.Bad, c.files, c.skipped)
		}
		n := 0
		for _, k := range l.Skipped {
			n += k
		}
		if want := 6 - len(c.files); n != want { // every visible file listed or counted
			t.Errorf("%+v: %d files skipped, want %d", c.sel, n, want)
		}
	}
}

// TestRunJobSelection: a run with Include indexes the files it chooses,
// .go ones too, and verifies against a batch build of the same choice;
// it counts the rest as skipped; a bad glob is refused before the run
// touches the store.
func TestRunJobSelection(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.md": "alpha", "main.go": "package main // gopher", "Makefile": "all:"})
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep := &recordReport{}
	_, err = RunJob(ctx, db, JobOptions{Src: src, Select: Selection{Include: []string{"*.go", "["}}, Report: rep})
	if !errors.Is(err, ErrBadGlob) || len(rep.events) != 0 {
		t.Fatalf("bad glob: %v, reported %q", err, rep.events)
	}
	if st, err := db.ObserverStatus(ctx); err != nil || len(st.Observers) != 0 {
		t.Fatalf("a refused run registered observers: %+v, %v", st.Observers, err)
	}
	sum, err := RunJob(ctx, db, JobOptions{Src: src, Verify: true, Select: Selection{Include: []string{"*.go"}}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 1 || sum.Documents != 1 || !sum.Verified || !maps.Equal(sum.Skipped, map[string]int{".md": 1, "": 1}) {
		t.Fatalf("summary %+v", sum)
	}
	if got, err := Query(ctx, db, "gopher"); err != nil || !slices.Equal(got, []string{"main.go"}) {
		t.Fatalf("query gopher: %q, %v", got, err)
	}
}
