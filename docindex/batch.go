package docindex

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrNotEqual is wrapped by the error Equal returns for differing indexes.
var ErrNotEqual = errors.New("docindex: indexes differ")

// Index is the whole index of a corpus. Build returns it with every map
// non-nil; it is not modified afterwards, so its methods are safe to call
// concurrently.
type Index struct {
	// Docs maps path -> parsed doc, for every indexable file.
	// Invariant: Docs[p] == Parse(p, content of p).
	Docs map[string]Doc
	// Canonical maps content hash -> canonical path: the bytewise-smallest
	// path among the files with that hash.
	// Invariant: one entry per distinct Docs[p].Hash.
	Canonical map[string]string
	// Terms maps term -> canonical paths whose doc has the term.
	// Invariant: every list sorted, distinct, non-empty, and free of
	// non-canonical paths.
	Terms map[string][]string
	// InLinks maps target path -> number of distinct canonical docs, other
	// than the target itself, that link to it. The target need not exist
	// in the corpus, and is not mapped to its own canonical path.
	// Invariant: every count > 0.
	InLinks map[string]int
}

// Build indexes a corpus from scratch. files maps corpus paths (clean,
// relative, slash-separated) to contents; paths that are not Indexable are
// ignored. Build keeps no reference to files.
func Build(files map[string][]byte) *Index { return BuildChosen(files, Selection{}) }

// BuildChosen is Build over the paths sel chooses, the others ignored:
// the reference of an index of the files ListDir chose with sel.
func BuildChosen(files map[string][]byte, sel Selection) *Index {
	ix := &Index{
		Docs:      make(map[string]Doc),
		Canonical: make(map[string]string),
		Terms:     make(map[string][]string),
		InLinks:   make(map[string]int),
	}
	for p, content := range files {
		if sel.Chooses(p) {
			ix.Docs[p] = Parse(p, content)
		}
	}
	for p, d := range ix.Docs {
		if c, ok := ix.Canonical[d.Hash]; !ok || p < c {
			ix.Canonical[d.Hash] = p
		}
	}
	for _, p := range ix.Canonical {
		ix.addCanonical(p, ix.Docs[p])
	}
	for _, ps := range ix.Terms {
		slices.Sort(ps)
	}
	return ix
}

// addCanonical adds the terms and out-links of the canonical doc d at p.
// It leaves the Terms lists unsorted.
func (ix *Index) addCanonical(p string, d Doc) {
	for _, w := range d.Words {
		ix.Terms[w] = append(ix.Terms[w], p)
	}
	for _, t := range d.Links {
		ix.InLinks[t]++ // d.Links is distinct and excludes p itself.
	}
}

// Query returns the canonical paths of the docs that have the term word
// (lowercased), sorted, or nil if there are none. The caller owns the
// returned slice.
func (ix *Index) Query(word string) []string {
	return slices.Clone(ix.Terms[strings.ToLower(word)])
}

// Dups returns the clusters of two or more docs with equal content. Each
// cluster is sorted, so its canonical path comes first; the clusters are
// sorted by canonical path. Dups returns nil if there are none.
func (ix *Index) Dups() [][]string {
	byHash := make(map[string][]string)
	for p, d := range ix.Docs {
		byHash[d.Hash] = append(byHash[d.Hash], p)
	}
	var dups [][]string
	for _, ps := range byHash {
		if len(ps) >= 2 {
			slices.Sort(ps)
			dups = append(dups, ps)
		}
	}
	slices.SortFunc(dups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return dups
}

// Equal returns nil if ix and o hold the same index, and otherwise an error
// wrapping ErrNotEqual that names the first difference, comparing Docs,
// Canonical, Terms and InLinks in that order, each by sorted key. Nil and
// empty maps and slices are equal.
func (ix *Index) Equal(o *Index) error {
	if ix == nil || o == nil {
		if ix == o {
			return nil
		}
		return fmt.Errorf("%w: one index is nil", ErrNotEqual)
	}
	return firstErr(
		func() error { return diffMap("Docs", ix.Docs, o.Docs, diffDoc) },
		func() error { return diffMap("Canonical", ix.Canonical, o.Canonical, diffValue) },
		func() error { return diffMap("Terms", ix.Terms, o.Terms, diffSlice) },
		func() error { return diffMap("InLinks", ix.InLinks, o.InLinks, diffValue) },
	)
}

// firstErr runs fns in order up to the first that fails, and returns its
// error.
func firstErr(fns ...func() error) error {
	for _, fn := range fns {
		if err := fn(); err != nil {
			return err
		}
	}
	return nil
}

// diffMap returns an error naming the smallest key at which a and b
// differ. diff describes a difference between two values as a suffix of
// the value's name (": 1 != 2"), or returns "" if they are equal.
func diffMap[V any](field string, a, b map[string]V, diff func(x, y V) string) error {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		x, inA := a[k]
		y, inB := b[k]
		var d string
		switch {
		case !inB:
			d = ": in receiver only"
		case !inA:
			d = ": in argument only"
		default:
			d = diff(x, y)
		}
		if d != "" {
			return fmt.Errorf("%w: %s[%q]%s", ErrNotEqual, field, k, d)
		}
	}
	return nil
}

func diffValue[V comparable](x, y V) string {
	if x != y {
		return fmt.Sprintf(": %s != %s", quoted(x), quoted(y))
	}
	return ""
}

// quoted formats strings with %q and everything else with %v.
func quoted(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// diffSlice describes the first index at which x and y differ, or their
// lengths if one is a prefix of the other.
func diffSlice(x, y []string) string {
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return fmt.Sprintf("[%d]: %q != %q", i, x[i], y[i])
		}
	}
	if len(x) != len(y) {
		return fmt.Sprintf(": length %d != %d", len(x), len(y))
	}
	return ""
}

func diffDoc(x, y Doc) string {
	fields := []struct {
		name string
		d    string
	}{
		{"Hash", diffValue(x.Hash, y.Hash)},
		{"Title", diffValue(x.Title, y.Title)},
		{"Words", diffSlice(x.Words, y.Words)},
		{"Links", diffSlice(x.Links, y.Links)},
	}
	for _, f := range fields {
		if f.d != "" {
			return "." + f.name + f.d
		}
	}
	return ""
}
