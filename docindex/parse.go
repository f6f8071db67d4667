package docindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/net/html"
)

// Doc is what the document stage extracts from one file.
//
// A Doc is a value: Parse leaves Words and Links nil rather than empty, so
// two Docs parsed from the same input are also reflect.DeepEqual.
type Doc struct {
	// Title is, for HTML, the text of the first <title> element with
	// whitespace collapsed and trimmed; if that is empty, the text of the
	// first <h1> element, collapsed and trimmed; else "". For text, the
	// first line that is not blank, trimmed.
	Title string
	// Words are the document's terms (see doc.go, "Documents", 2).
	// Invariant: sorted, distinct, each 2..64 bytes.
	Words []string
	// Links are the corpus paths the document's <a href> point to (see
	// doc.go, "Links"). Always nil for text files.
	// Invariant: sorted, distinct, each Indexable, clean, relative, and
	// never the document's own path.
	Links []string
	// Hash is the lowercase hex SHA-256 of the raw file bytes.
	Hash string
}

// Term length limits, in bytes of the lowercased term.
const (
	minTermLen = 2
	maxTermLen = 64
)

// Indexable reports whether the file named by p is part of a corpus: its
// extension, compared case-insensitively, is .html, .htm, .txt or .md.
func Indexable(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".html", ".htm", ".txt", ".md":
		return true
	}
	return false
}

// isHTML reports whether p is parsed as HTML rather than as text.
func isHTML(p string) bool {
	ext := strings.ToLower(path.Ext(p))
	return ext == ".html" || ext == ".htm"
}

// Parse extracts the Doc of the file at corpus path p (a clean, relative,
// slash-separated path, as ReadCorpus returns) with the given content.
// Files named .html or .htm are parsed as HTML, every other file as text.
// Any other p is first made clean and relative for resolving links.
// Parse is a pure function of its arguments: it never panics, keeps no
// reference to content and is safe to call concurrently.
func Parse(p string, content []byte) Doc {
	var d Doc
	if isHTML(p) {
		d = parseHTML(p, content)
	} else {
		d = parseText(content)
	}
	d.Hash = hashOf(content)
	return d
}

func parseText(content []byte) Doc {
	s := string(content)
	ts := make(termSet)
	ts.add(s)
	return Doc{Title: firstLine(s), Words: ts.sorted()}
}

// firstLine returns the first line of s that is not blank, trimmed. Lines
// end at '\n'.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

// termSet collects distinct terms.
type termSet map[string]struct{}

// add adds the terms of s: maximal runs of letters and digits, lowercased
// rune by rune, kept if the lowercased run is 2..64 bytes long. A longer
// run is dropped whole, not truncated. Invalid UTF-8 separates runs.
func (ts termSet) add(s string) {
	for run := range strings.FieldsFuncSeq(s, isSeparator) {
		t := strings.ToLower(run)
		if len(t) >= minTermLen && len(t) <= maxTermLen {
			ts[t] = struct{}{}
		}
	}
}

func isSeparator(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// sorted returns the terms in order, nil if there are none.
func (ts termSet) sorted() []string { return slices.Sorted(maps.Keys(ts)) }

// htmlDoc is the state of one pass of the HTML tokenizer over a document.
type htmlDoc struct {
	path  string // the document's own path, cleaned
	terms termSet
	links termSet

	// opened is the raw-text element ("script", "style", or "title" for
	// the first <title> only) whose start tag was the previous token. The
	// tokenizer returns such an element's whole content as the next token,
	// if it is text.
	opened    string
	titleSeen bool
	title     string
	h1Depth   int  // nesting depth inside the first <h1>
	h1Done    bool // the first <h1> has ended
	h1        strings.Builder
}

func parseHTML(p string, content []byte) Doc {
	// A path that is not clean and relative is made so, so that Links keep
	// their invariant whatever p is; a clean relative p is unchanged.
	base := strings.TrimPrefix(path.Clean("/"+p), "/")
	h := htmlDoc{path: base, terms: make(termSet), links: make(termSet)}
	z := html.NewTokenizer(bytes.NewReader(content))
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		h.token(z, tt)
	}
	title := h.title
	if title == "" {
		title = collapse(h.h1.String())
	}
	return Doc{Title: title, Words: h.terms.sorted(), Links: h.links.sorted()}
}

// token handles one token. Self-closing tags count as start tags, as they
// do in HTML for every element this parser looks at.
func (h *htmlDoc) token(z *html.Tokenizer, tt html.TokenType) {
	opened := h.opened
	h.opened = ""
	switch tt {
	case html.TextToken:
		h.text(string(z.Text()), opened)
	case html.StartTagToken, html.SelfClosingTagToken:
		h.startTag(z)
	case html.EndTagToken:
		h.endTag(z)
	}
}

// text handles a text token, entities already decoded. Every tag, comment
// and doctype between two text tokens separates terms.
func (h *htmlDoc) text(s, opened string) {
	switch opened {
	case "script", "style":
		return
	case "title":
		h.title = collapse(s)
	}
	h.terms.add(s)
	if h.h1Depth > 0 {
		h.h1.WriteString(s)
	}
}

func (h *htmlDoc) startTag(z *html.Tokenizer) {
	name, hasAttr := z.TagName()
	switch string(name) {
	case "script", "style":
		h.opened = string(name)
	case "title":
		if !h.titleSeen {
			h.titleSeen = true
			h.opened = "title"
		}
	case "h1":
		if !h.h1Done {
			h.h1Depth++
		}
	case "a":
		if hasAttr {
			h.anchor(z)
		}
	}
}

func (h *htmlDoc) endTag(z *html.Tokenizer) {
	name, _ := z.TagName()
	if string(name) == "h1" && h.h1Depth > 0 {
		h.h1Depth--
		h.h1Done = h.h1Depth == 0
	}
}

// anchor records the target of an <a> tag's href; of duplicate href
// attributes the first wins, as in HTML.
func (h *htmlDoc) anchor(z *html.Tokenizer) {
	for {
		key, val, more := z.TagAttr()
		if string(key) == "href" {
			if t, ok := resolve(h.path, string(val)); ok {
				h.links[t] = struct{}{}
			}
			return
		}
		if !more {
			return
		}
	}
}

// resolve maps href, found in the document at corpus path base, to the
// corpus path it names. It reports false for a link that is not kept: see
// doc.go, "Links", for the steps and their order.
func resolve(base, href string) (string, bool) {
	ref := stripURLSpace(href)
	ref, _, _ = strings.Cut(ref, "#")
	ref, _, _ = strings.Cut(ref, "?")
	if ref == "" || hasScheme(ref) || strings.HasPrefix(ref, "//") {
		return "", false
	}
	ref, err := url.PathUnescape(ref)
	if err != nil || !Indexable(ref[strings.LastIndexByte(ref, '/')+1:]) {
		return "", false
	}
	dir := path.Dir(base)
	if strings.HasPrefix(ref, "/") {
		dir = "."
	}
	t := path.Clean(dir + "/" + ref)
	if t == ".." || strings.HasPrefix(t, "../") || t == base {
		return "", false
	}
	return t, true
}

// stripURLSpace removes what URL parsing ignores: leading and trailing C0
// controls and spaces, and ASCII tabs and newlines anywhere.
func stripURLSpace(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	return strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
}

// hasScheme reports whether ref starts with a URL scheme and a colon:
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":".
func hasScheme(ref string) bool {
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case c == ':':
			return i > 0
		default:
			return false
		}
	}
	return false
}

// collapse replaces each run of white space in s by one space and trims
// the ends.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// hashOf is Doc.Hash of content: the hex SHA-256 of the raw bytes.
func hashOf(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}
