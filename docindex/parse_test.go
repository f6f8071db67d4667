package docindex

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestIndexable(t *testing.T) {
	for p, want := range map[string]bool{
		"a.html":        true,
		"a/b.htm":       true,
		"README.TXT":    true,
		"notes.Md":      true,
		"a.html.gz":     false,
		"a.png":         false,
		"README":        false,
		"html":          false,
		"dir.html/file": false,
		"":              false,
	} {
		if got := Indexable(p); got != want {
			t.Errorf("Indexable(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestParseTitle(t *testing.T) {
	for _, tc := range []struct {
		name, path, content, want string
	}{
		{"title collapsed", "a.html", "<title>  Hello \n\t World  </title>", "Hello World"},
		{"title entities", "a.html", "<title>A &amp; B&#33;</title>", "A & B!"},
		{"title uppercase tag", "a.html", "<TITLE>Up</TITLE>", "Up"},
		{"first title wins", "a.html", "<title>One</title><title>Two</title>", "One"},
		{"title beats h1", "a.html", "<h1>Head</h1><title>Tit</title>", "Tit"},
		{"blank title falls back to h1", "a.html", "<title> \n </title><h1> Head <b>line</b> </h1>", "Head line"},
		{"no title uses h1", "a.html", "<h1><a name=x></a>Top</h1><h1>Second</h1>", "Top"},
		{"h1 joins inline text", "a.html", "<h1>foo<b>bar</b></h1>", "foobar"},
		{"first h1 only even if empty", "a.html", "<h1></h1><h1>Second</h1>", ""},
		{"nested h1 ends at outer end", "a.html", "<h1>a<h1>b</h1>c</h1><p>d", "abc"},
		{"unclosed h1 runs to EOF", "a.html", "<h1>Open <p>rest", "Open rest"},
		{"script in h1 skipped", "a.html", "<h1>A<script>x</script>B</h1>", "AB"},
		{"no title or h1", "a.html", "<p>Just text</p>", ""},
		{"htm is HTML", "a.HTM", "<title>T</title>", "T"},
		{"text first non-blank line", "a.txt", "\n  \t\n  First line  \r\nsecond", "First line"},
		{"text title not collapsed", "a.txt", "a  b", "a  b"},
		{"text empty", "a.txt", "", ""},
		{"markdown is text", "a.md", "# Heading\n\nbody", "# Heading"},
		{"text ignores tags", "a.txt", "<title>T</title>", "<title>T</title>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Parse(tc.path, []byte(tc.content)).Title; got != tc.want {
				t.Errorf("Title = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseWords(t *testing.T) {
	x64, y65 := strings.Repeat("x", 64), strings.Repeat("y", 65)
	e32, e33 := strings.Repeat("é", 32), strings.Repeat("é", 33) // "é" is 2 bytes
	for _, tc := range []struct {
		name, path, content string
		want                []string
	}{
		{"case folded, distinct, sorted", "a.txt", "World hello WORLD Hello", []string{"hello", "world"}},
		{"length limits in bytes", "a.txt", "a ab " + x64 + " " + y65, []string{"ab", x64}},
		{"multibyte lengths", "a.txt", "é " + e32 + " " + e33, []string{"é", e32}},
		{"length after lowercasing", "a.txt", "\u212a \u212aa", []string{"ka"}}, // Kelvin sign: 3 bytes, lowercases to "k"
		{"digits are term runes", "a.txt", "v2 42 7", []string{"42", "v2"}},
		{"punctuation separates", "a.txt", "ffi_call(cif, &x->y)", []string{"call", "cif", "ffi"}},
		{"unicode letters", "a.txt", "Straße ÉTÉ Ünïcode", []string{"straße", "été", "ünïcode"}},
		{"invalid utf-8 separates", "a.txt", "ab\xffcd", []string{"ab", "cd"}},
		{"no terms", "a.txt", "a b c !!", nil},
		{"text keeps markup", "a.txt", "<script>alert</script>", []string{"alert", "script"}},
		{"html entities decoded", "a.html", "<p>caf&eacute; &amp;amp; x&#65;y AT&amp;T</p>", []string{"amp", "at", "café", "xay"}},
		{"script and style skipped", "a.html", "<script>var secret = 1;</script><style>.hidden{}</style><p>shown</p>", []string{"shown"}},
		{"self-closing script skipped", "a.html", "<script/>hidden</script>shown", []string{"shown"}},
		{"uppercase script skipped", "a.html", "<SCRIPT>hidden</SCRIPT>shown", []string{"shown"}},
		{"tags attributes comments skipped", "a.html", `<!DOCTYPE html><a href="attrword.html" title="tooltip">link</a><!-- comment -->`, []string{"link"}},
		{"title included", "a.html", "<head><title>Titled</title></head><body>body</body>", []string{"body", "titled"}},
		{"later title is text", "a.html", "<title>one</title><title>two</title>", []string{"one", "two"}},
		{"tags separate terms", "a.html", "ab<b>cd</b>ef", []string{"ab", "cd", "ef"}},
		{"html no terms", "a.html", "<p>&nbsp;</p>", nil},
		{"other raw text not decoded", "a.html", "<xmp>caf&eacute;</xmp>", []string{"caf", "eacute"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Parse(tc.path, []byte(tc.content)).Words; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Words = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseLinks(t *testing.T) {
	const self = "dir/page.html"
	for _, tc := range []struct {
		name, path, href string
		want             []string // nil: the link is dropped
	}{
		{"sibling", self, "other.html", []string{"dir/other.html"}},
		{"subdirectory", self, "sub/x.htm", []string{"dir/sub/x.htm"}},
		{"dot segments", self, "./sub/../y.html", []string{"dir/y.html"}},
		{"repeated slashes", self, "sub//z.html", []string{"dir/sub/z.html"}},
		{"parent", self, "../top.html", []string{"top.html"}},
		{"above root", self, "../../out.html", nil},
		{"above root from root", "index.html", "../out.html", nil},
		{"root-relative", self, "/root.html", []string{"root.html"}},
		{"root-relative above root", self, "/../x.html", nil},
		{"from root", "index.html", "a/b.html", []string{"a/b.html"}},
		{"fragment dropped", self, "other.html#sec", []string{"dir/other.html"}},
		{"query dropped", self, "q.html?x=1#y", []string{"dir/q.html"}},
		{"query with hash inside", self, "q.html?a#b?c", []string{"dir/q.html"}},
		{"fragment only is self", self, "#top", nil},
		{"query only is self", self, "?x=1", nil},
		{"empty is self", self, "", nil},
		{"http", self, "http://example.com/a.html", nil},
		{"scheme case-insensitive", self, "HTTPS://example.com/a.html", nil},
		{"mailto", self, "mailto:x@y.html", nil},
		{"other scheme", self, "c+x-y.z:a.html", nil},
		{"network path", self, "//host/a.html", nil},
		{"colon after slash is a path", self, "a/b:c.html", []string{"dir/a/b:c.html"}},
		{"digit first is no scheme", self, "1:x.html", []string{"dir/1:x.html"}},
		{"self by name", self, "page.html", nil},
		{"self by dot", self, "./page.html", nil},
		{"self via parent", self, "../dir/page.html", nil},
		{"self with fragment", self, "page.html#x", nil},
		{"not indexable", self, "img.png", nil},
		{"directory", self, "sub/", nil},
		{"dot", self, ".", nil},
		{"dot dot", self, "..", nil},
		{"directory named like a file", self, "x.html/", nil},
		{"txt and md kept", self, "READ.TXT", []string{"dir/READ.TXT"}},
		{"percent decoded", self, "my%20file.html", []string{"dir/my file.html"}},
		{"percent-encoded extension", self, "f.%68tml", []string{"dir/f.html"}},
		{"bad escape", self, "bad%zz.html", nil},
		{"entities in href", self, "&#x62;.html?x=1&amp;y=2", []string{"dir/b.html"}},
		{"whitespace stripped", self, " \n\tsp\nace.html\r\n ", []string{"dir/space.html"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := `<a class=x href="` + tc.href + `">link</a>`
			if got := Parse(tc.path, []byte(content)).Links; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("href %q in %s: Links = %q, want %q", tc.href, tc.path, got, tc.want)
			}
		})
	}
}

func TestParseLinksDocument(t *testing.T) {
	for _, tc := range []struct {
		name, path, content string
		want                []string
	}{
		{"distinct and sorted", "p.html", `<a href="b.html">1</a><a href="a.html">2</a><a href="b.html#x">3</a>`, []string{"a.html", "b.html"}},
		{"uppercase tag and attribute", "p.html", `<A HREF="up.html">x</A>`, []string{"up.html"}},
		{"first href wins", "p.html", `<a href="one.html" href="two.html">x</a>`, []string{"one.html"}},
		{"self-closing a", "p.html", `<a href="s.html"/>`, []string{"s.html"}},
		{"only a tags", "p.html", `<link href="l.html"><area href="r.html"><base href="b.html"><img src="i.html">`, nil},
		{"anchor without href", "p.html", `<a name="n">x</a>`, nil},
		{"no links in script", "p.html", `<script>"<a href='s.html'>"</script>`, nil},
		{"no links in noscript", "p.html", `<noscript><a href="n.html">x</a></noscript>`, nil},
		{"text files have no links", "p.txt", `<a href="a.html">x</a>`, nil},
		{"markdown has no links", "p.md", `[x](a.html) <a href="b.html">y</a>`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Parse(tc.path, []byte(tc.content)).Links; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Links = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseHash(t *testing.T) {
	for _, tc := range []struct{ path, content, want string }{
		{"a.txt", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"a.txt", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"b/c.html", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		if got := Parse(tc.path, []byte(tc.content)).Hash; got != tc.want {
			t.Errorf("Parse(%q, %q).Hash = %s, want %s", tc.path, tc.content, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []struct{ path, content string }{
		{"a.html", "<title>T &amp; U</title><h1>H</h1><p>Hello, World</p><a href=\"../b.html#x\">b</a>"},
		{"d/e/f.htm", "<script>x<y</script><style>a{}</style><a href=\"/../x.html\"><a href=\"%zz.html\">"},
		{"x.txt", "\n  First line\nsecond line \xff\xfe words"},
		{"../weird/./p.html", "<a href=\"q.html\">q</a><a href=\"//h/x.html\"><a href=\"p.html\">"},
		{"/abs.html", "<h1><title></title><a href='x.md'></h1><plaintext><a href='y.md'>"},
		{"m.md", strings.Repeat("\u212aé", 40)},
		{"", "<a href=\"\x00.html\">"},
	} {
		f.Add(seed.path, []byte(seed.content))
	}
	f.Fuzz(func(t *testing.T, p string, content []byte) {
		d := Parse(p, content)
		checkDoc(t, p, content, d)
		if again := Parse(p, content); !reflect.DeepEqual(d, again) {
			t.Fatalf("Parse is not deterministic: %+v then %+v", d, again)
		}
	})
}

// checkDoc checks the invariants of d = Parse(p, content) from doc.go.
func checkDoc(t *testing.T, p string, content []byte, d Doc) {
	t.Helper()
	sum := sha256.Sum256(content)
	if d.Hash != hex.EncodeToString(sum[:]) {
		t.Errorf("Hash = %s, want SHA-256 of content", d.Hash)
	}
	if d.Title != strings.TrimSpace(d.Title) {
		t.Errorf("Title %q is not trimmed", d.Title)
	}
	checkSorted(t, "Words", d.Words)
	for _, w := range d.Words {
		if len(w) < minTermLen || len(w) > maxTermLen || strings.ContainsFunc(w, isSeparator) {
			t.Errorf("bad term %q", w)
		}
	}
	checkSorted(t, "Links", d.Links)
	for _, l := range d.Links {
		if !Indexable(l) || path.Clean(l) != l || l == ".." || strings.HasPrefix(l, "/") ||
			strings.HasPrefix(l, "../") || l == path.Clean(p) {
			t.Errorf("bad link %q in %q", l, p)
		}
	}
	if !isHTML(p) && d.Links != nil {
		t.Errorf("text file %q has links %q", p, d.Links)
	}
}

// checkSorted checks that s is nil or non-empty, strictly increasing.
func checkSorted(t *testing.T, name string, s []string) {
	t.Helper()
	if s != nil && len(s) == 0 {
		t.Errorf("%s is empty but not nil", name)
	}
	if !slices.IsSorted(s) || len(slices.Compact(slices.Clone(s))) != len(s) {
		t.Errorf("%s not sorted and distinct: %q", name, s)
	}
}
