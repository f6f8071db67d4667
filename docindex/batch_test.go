package docindex

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// smallCorpus has one duplicate pair whose copies link differently (same
// bytes, different directories), links from a canonical doc to a
// non-canonical copy, to a missing file and to itself, and files that are
// not indexable.
func smallCorpus() map[string][]byte {
	dup := `<title>Dup</title><p>dup shared</p><a href="../a.html">up</a><a href="e.html">e</a>`
	return map[string][]byte{
		"a.html": []byte(`<title>Alpha</title><p>shared alpha</p>` +
			`<a href="b.html">b</a><a href="c.txt">c</a><a href="missing.html">m</a><a href="a.html">self</a>`),
		"b.html": []byte(`<h1>Beta</h1><p>Shared beta</p>` +
			`<a href="a.html">a</a><a href="a.html#x">again</a><a href="sub/d.html">d</a>`),
		"c.txt":       []byte("Gamma notes\nshared gamma\n"),
		"sub/d.html":  []byte(dup),
		"copy/d.html": []byte(dup),
		"image.png":   []byte("shared png"),
		"README":      []byte("shared readme"),
	}
}

func TestBuildSmall(t *testing.T) {
	files := smallCorpus()
	ix := Build(files)
	if got, want := slices.Sorted(maps.Keys(ix.Docs)), []string{"a.html", "b.html", "c.txt", "copy/d.html", "sub/d.html"}; !slices.Equal(got, want) {
		t.Fatalf("Docs keys = %q, want %q", got, want)
	}
	for p, d := range ix.Docs {
		if want := Parse(p, files[p]); !reflect.DeepEqual(d, want) {
			t.Errorf("Docs[%q] = %+v, want Parse = %+v", p, d, want)
		}
	}
	dupHash := ix.Docs["sub/d.html"].Hash
	wantCanonical := map[string]string{
		ix.Docs["a.html"].Hash: "a.html",
		ix.Docs["b.html"].Hash: "b.html",
		ix.Docs["c.txt"].Hash:  "c.txt",
		dupHash:                "copy/d.html", // "copy/" < "sub/"
	}
	if !maps.Equal(ix.Canonical, wantCanonical) {
		t.Errorf("Canonical = %v, want %v", ix.Canonical, wantCanonical)
	}
	wantTerms := map[string][]string{
		"shared": {"a.html", "b.html", "c.txt", "copy/d.html"}, // not sub/d.html, image.png, README
		"alpha":  {"a.html"},
		"beta":   {"b.html"},
		"gamma":  {"c.txt"},
		"notes":  {"c.txt"},
		"dup":    {"copy/d.html"},
		"self":   {"a.html"}, // link text is text; one-letter link texts are too short
		"again":  {"b.html"},
		"up":     {"copy/d.html"},
	}
	if !maps.EqualFunc(ix.Terms, wantTerms, slices.Equal) {
		t.Errorf("Terms = %q, want %q", ix.Terms, wantTerms)
	}
	wantInLinks := map[string]int{
		"a.html":       2, // b.html (twice, counted once) and copy/d.html; not itself, not sub/d.html
		"b.html":       1,
		"c.txt":        1,
		"missing.html": 1, // need not exist
		"sub/d.html":   1, // a non-canonical copy counts for its own path
		"copy/e.html":  1, // from the canonical copy; sub/e.html is absent
	}
	if !maps.Equal(ix.InLinks, wantInLinks) {
		t.Errorf("InLinks = %v, want %v", ix.InLinks, wantInLinks)
	}
}

func TestQuery(t *testing.T) {
	ix := Build(smallCorpus())
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"shared", []string{"a.html", "b.html", "c.txt", "copy/d.html"}},
		{"SHARED", []string{"a.html", "b.html", "c.txt", "copy/d.html"}},
		{"Dup", []string{"copy/d.html"}},
		{"png", nil},
		{"nope", nil},
		{"", nil},
	} {
		if got := ix.Query(tc.word); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Query(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	ix.Query("shared")[0] = "changed"
	if got := ix.Terms["shared"][0]; got != "a.html" {
		t.Errorf("writing to Query's result changed the index: Terms[shared][0] = %q", got)
	}
}

func TestDups(t *testing.T) {
	files := smallCorpus()
	if got := Build(files).Dups(); !reflect.DeepEqual(got, [][]string{{"copy/d.html", "sub/d.html"}}) {
		t.Errorf("Dups = %q", got)
	}
	for _, p := range []string{"x2.txt", "aa/x.txt", "x0.txt"} {
		files[p] = []byte("triple")
	}
	want := [][]string{{"aa/x.txt", "x0.txt", "x2.txt"}, {"copy/d.html", "sub/d.html"}}
	if got := Build(files).Dups(); !reflect.DeepEqual(got, want) {
		t.Errorf("Dups = %q, want %q", got, want)
	}
	if got := Build(map[string][]byte{"a.txt": []byte("a")}).Dups(); got != nil {
		t.Errorf("Dups with no duplicates = %q, want nil", got)
	}
}

func TestEqual(t *testing.T) {
	hash := Build(smallCorpus()).Docs["a.html"].Hash
	for _, tc := range []struct {
		name   string
		mutate func(ix *Index)
		want   string // "" for equal
	}{
		{"same", func(*Index) {}, ""},
		{"nil and empty slices", func(ix *Index) {
			d := ix.Docs["c.txt"]
			d.Links = []string{}
			ix.Docs["c.txt"] = d
		}, ""},
		{"title", func(ix *Index) {
			d := ix.Docs["b.html"]
			d.Title = "Bet"
			ix.Docs["b.html"] = d
		}, `Docs["b.html"].Title: "Beta" != "Bet"`},
		{"word", func(ix *Index) { ix.Docs["c.txt"].Words[0] = "zz" }, `Docs["c.txt"].Words[0]: "gamma" != "zz"`},
		{"extra link", func(ix *Index) {
			d := ix.Docs["c.txt"]
			d.Links = []string{"a.html"}
			ix.Docs["c.txt"] = d
		}, `Docs["c.txt"].Links: length 0 != 1`},
		{"missing doc", func(ix *Index) { delete(ix.Docs, "sub/d.html") }, `Docs["sub/d.html"]: in receiver only`},
		{"canonical", func(ix *Index) { ix.Canonical[hash] = "z.html" }, fmt.Sprintf(`Canonical[%q]: "a.html" != "z.html"`, hash)},
		{"extra term", func(ix *Index) { ix.Terms["extra"] = []string{"a.html"} }, `Terms["extra"]: in argument only`},
		{"postings", func(ix *Index) { ix.Terms["shared"] = ix.Terms["shared"][:3] }, `Terms["shared"]: length 4 != 3`},
		{"in-links", func(ix *Index) { ix.InLinks["a.html"]++ }, `InLinks["a.html"]: 2 != 3`},
		{"first difference wins", func(ix *Index) {
			ix.InLinks["a.html"]++
			delete(ix.Terms, "alpha")
			delete(ix.Docs, "c.txt")
			delete(ix.Docs, "b.html")
		}, `Docs["b.html"]: in receiver only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got := Build(smallCorpus()), Build(smallCorpus())
			tc.mutate(got)
			err := want.Equal(got)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Equal = %v, want nil", err)
			case tc.want == "":
				return
			case !errors.Is(err, ErrNotEqual):
				t.Fatalf("Equal = %v, want ErrNotEqual", err)
			case err.Error() != ErrNotEqual.Error()+": "+tc.want:
				t.Fatalf("Equal = %q, want %q", err, tc.want)
			}
		})
	}
}

func TestEqualNil(t *testing.T) {
	var nilIx *Index
	if err := nilIx.Equal(nil); err != nil {
		t.Errorf("nil.Equal(nil) = %v", err)
	}
	if err := Build(nil).Equal(nil); !errors.Is(err, ErrNotEqual) {
		t.Errorf("Equal(nil) = %v, want ErrNotEqual", err)
	}
	if err := Build(nil).Equal(&Index{}); err != nil {
		t.Errorf("empty index vs zero Index: %v", err)
	}
}

// TestBuildRandom checks Build against the definitions in doc.go, computed
// another way, on random corpora; and checks that adding a non-canonical
// duplicate changes nothing but Docs and Dups.
func TestBuildRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 200 {
		files := randomCorpus(rng)
		ix := Build(files)
		checkIndex(t, files, ix)
		checkDupInvisible(t, rng, files, ix)
		if t.Failed() {
			t.Fatalf("failed with seed %d on corpus %q", seed, files)
		}
	}
}

var (
	randomDirs  = []string{"", "a/", "b/", "a/c/"}
	randomNames = []string{"x.html", "y.htm", "z.txt", "w.md", "v.png"}
	randomWords = []string{"alpha", "beta", "Gamma", "delta", "q", "&amp;", "<b>eps</b>"}
	randomHrefs = []string{"x.html", "../x.html", "/y.htm", "c/z.txt", "#f", "x.html?q", "http://h/x.html", "w.md", "../../x.html"}
)

// randomCorpus returns a few files drawn from a small set of paths and
// contents, so that duplicates, shared terms and links between files are
// common. No path starts with "z".
func randomCorpus(rng *rand.Rand) map[string][]byte {
	files := make(map[string][]byte)
	var contents [][]byte
	for range rng.IntN(12) {
		p := randomDirs[rng.IntN(len(randomDirs))] + randomNames[rng.IntN(len(randomNames))]
		if len(contents) > 0 && rng.IntN(4) == 0 {
			files[p] = contents[rng.IntN(len(contents))]
			continue
		}
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(randomWords[rng.IntN(len(randomWords))] + " ")
			fmt.Fprintf(&b, `<a href="%s">l</a> `, randomHrefs[rng.IntN(len(randomHrefs))])
		}
		files[p] = []byte(b.String())
		contents = append(contents, files[p])
	}
	return files
}

// checkIndex checks ix = Build(files) against doc.go's definitions.
func checkIndex(t *testing.T, files map[string][]byte, ix *Index) {
	t.Helper()
	var paths []string // indexable, sorted
	for p := range files {
		if Indexable(p) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	canonical := make(map[string]string)
	terms := make(map[string][]string)
	inLinks := make(map[string]int)
	for _, p := range paths { // in order, so the first path of a hash is the smallest
		d := Parse(p, files[p])
		if _, ok := canonical[d.Hash]; ok {
			continue
		}
		canonical[d.Hash] = p
		for _, w := range d.Words {
			terms[w] = append(terms[w], p)
		}
		for _, l := range d.Links {
			inLinks[l]++
		}
	}
	docs := make(map[string]Doc)
	for _, p := range paths {
		docs[p] = Parse(p, files[p])
	}
	want := &Index{Docs: docs, Canonical: canonical, Terms: terms, InLinks: inLinks}
	if err := want.Equal(ix); err != nil {
		t.Error(err)
	}
	for p, d := range ix.Docs {
		checkDoc(t, p, files[p], d)
	}
}

// checkDupInvisible adds a copy of a random file at a path larger than all
// others, and checks that only Docs and Dups change.
func checkDupInvisible(t *testing.T, rng *rand.Rand, files map[string][]byte, ix *Index) {
	t.Helper()
	if len(ix.Docs) == 0 {
		return
	}
	paths := slices.Sorted(maps.Keys(ix.Docs))
	src := paths[rng.IntN(len(paths))]
	more := maps.Clone(files)
	more["zz/"+src] = files[src]
	got := Build(more)
	if _, ok := got.Docs["zz/"+src]; !ok {
		t.Errorf("copy of %s not in Docs", src)
	}
	want := len(ix.Dups()) + 1
	if isDup(ix, src) {
		want-- // the copy joins src's cluster
	}
	if n := len(got.Dups()); n != want {
		t.Errorf("adding a copy of %s: %d clusters, want %d", src, n, want)
	}
	got.Docs = ix.Docs
	if err := ix.Equal(got); err != nil {
		t.Errorf("adding a copy of %s: %v", src, err)
	}
}

// isDup reports whether p is in a duplicate cluster of ix.
func isDup(ix *Index, p string) bool {
	for _, c := range ix.Dups() {
		if slices.Contains(c, p) {
			return true
		}
	}
	return false
}

func TestReadCorpus(t *testing.T) {
	dir := t.TempDir()
	for p, content := range map[string]string{
		"a.html":         "a",
		"sub/B.HTML":     "b",
		"sub/deep/c.txt": "c",
		"d.md":           "d",
		"e.png":          "e",
		".hidden.html":   "h",
		".git/x.html":    "x",
		"sub/.h/y.html":  "y",
	} {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.html", filepath.Join(dir, "link.html")); err != nil {
		t.Logf("no symlink: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.html"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCorpus(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"a.html": []byte("a"), "sub/B.HTML": []byte("b"), "sub/deep/c.txt": []byte("c"), "d.md": []byte("d")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadCorpus = %q, want %q", got, want)
	}
	if _, err := ReadCorpus(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadCorpus(missing) = %v, want fs.ErrNotExist", err)
	}
}

// The libffi manual's pages, all but the index linking to Index.html.
var libffiPages = []string{
	"Arrays-Unions-Enums.html", "Closure-Example.html", "Complex-Type-Example.html", "Complex.html",
	"Index.html", "Introduction.html", "Memory-Usage.html", "Missing-Features.html", "Multiple-ABIs.html",
	"Primitive-Types.html", "Simple-Example.html", "Size-and-Alignment.html", "Structures.html",
	"The-Basics.html", "The-Closure-API.html", "Thread-Safety.html", "Type-Example.html", "Types.html",
	"Using-libffi.html", "index.html",
}

// TestBuildCorpus checks facts about testdata/corpus verified by hand
// (grep, and reading the pages).
func TestBuildCorpus(t *testing.T) {
	files, err := ReadCorpus("../testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	ix := Build(files)
	checkIndex(t, files, ix)
	want := append(slices.Clone(libffiPages), "SOURCES.md", "mirror/Simple-Example.html", "users-and-groups.html",
		"text/base-passwd-README.txt", "text/hicolor-icon-theme-README.txt", "text/sed-AUTHORS.txt", "text/ssl-cert-README.txt")
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(ix.Docs)); !slices.Equal(got, want) {
		t.Errorf("Docs keys = %q, want %q", got, want)
	}
	for p, title := range map[string]string{
		"users-and-groups.html":       "Users and Groups in the Debian System", // <TITLE> spread over lines
		"index.html":                  "Top (libffi: the portable foreign function interface library)",
		"Index.html":                  "Index (libffi: the portable foreign function interface library)",
		"text/base-passwd-README.txt": "base-passwd for Debian",
		"text/sed-AUTHORS.txt":        "GNU Sed was first authored by Jay Fenlason (hack@gnu.org)",
		"SOURCES.md":                  "# Sources of this corpus",
	} {
		if got := ix.Docs[p].Title; got != title {
			t.Errorf("Docs[%q].Title = %q, want %q", p, got, title)
		}
	}
	checkCorpusDups(t, ix)
	checkCorpusTerms(t, ix)
	checkCorpusLinks(t, ix)
}

func checkCorpusDups(t *testing.T, ix *Index) {
	t.Helper()
	want := [][]string{{"Simple-Example.html", "mirror/Simple-Example.html"}}
	if got := ix.Dups(); !reflect.DeepEqual(got, want) {
		t.Errorf("Dups = %q, want %q", got, want)
	}
	if got := ix.Canonical[ix.Docs["mirror/Simple-Example.html"].Hash]; got != "Simple-Example.html" {
		t.Errorf("canonical of the mirror = %q", got)
	}
	if len(ix.Canonical) != len(ix.Docs)-1 {
		t.Errorf("%d hashes for %d docs, want one duplicate", len(ix.Canonical), len(ix.Docs))
	}
}

func checkCorpusTerms(t *testing.T, ix *Index) {
	t.Helper()
	for word, want := range map[string][]string{
		// Missing-Features.html has only "closures"; the mirror is not indexed.
		"closure": {"Closure-Example.html", "Index.html", "Memory-Usage.html", "Multiple-ABIs.html",
			"The-Closure-API.html", "Thread-Safety.html", "Using-libffi.html"},
		"libffi":   append(slices.Clone(libffiPages), "SOURCES.md"), // every page has it in its title
		"nobody":   {"users-and-groups.html"},
		"passwd":   {"SOURCES.md", "text/base-passwd-README.txt", "users-and-groups.html"},
		"fenlason": {"text/sed-AUTHORS.txt"},
		"quicky":   {"text/ssl-cert-README.txt"},
		"ffi_call": nil, // "_" separates terms
		"closures": {"Index.html", "Memory-Usage.html", "Missing-Features.html", "The-Closure-API.html"},
	} {
		slices.Sort(want)
		if got := ix.Query(word); !slices.Equal(got, want) {
			t.Errorf("Query(%q) = %q, want %q", word, got, want)
		}
	}
}

func checkCorpusLinks(t *testing.T, ix *Index) {
	t.Helper()
	// users-and-groups.html links only to fragments of itself, mailto: and http:.
	if got := ix.Docs["users-and-groups.html"].Links; got != nil {
		t.Errorf("users-and-groups.html links = %q, want none", got)
	}
	wantMirror := []string{"mirror/Index.html", "mirror/The-Basics.html", "mirror/Types.html", "mirror/Using-libffi.html"}
	if got := ix.Docs["mirror/Simple-Example.html"].Links; !slices.Equal(got, wantMirror) {
		t.Errorf("mirror links = %q, want %q", got, wantMirror)
	}
	for target, want := range map[string]int{
		"Index.html":        19, // every other libffi page; the mirror is not canonical
		"Types.html":        11, // grep -l 'href="Types.html' *.html
		"index.html":        5,
		"mirror/Types.html": 0, // only the non-canonical mirror links there
	} {
		if got := ix.InLinks[target]; got != want {
			t.Errorf("InLinks[%q] = %d, want %d", target, got, want)
		}
	}
}
