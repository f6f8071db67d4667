package docindex

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/seed-992972ee/percolator"
)

// The incremental index is a chain of observers over these rows (the
// paper's indexing pipeline in miniature):
//
//	doc/<path>           content (loader), loaded (loader: content hash),
//	                     parsed (JSON Doc), hash, canonical ("1" or "0")
//	hash/<hash>          members (JSON sorted paths with that content)
//	term/<term>/<path>   posting: a canonical doc has the term
//	link/<target>\x00<source>  from: a canonical doc links to target
//
// document (on content) parses the file and moves it between hash
// clusters; cluster (on members) marks each member canonical or not, the
// smallest path of the cluster being canonical (the paper's Figure 2);
// terms (on canonical) replaces the postings and links the doc contributes:
// its words and links if it is canonical, nothing otherwise. Postings are
// cells of their own, so documents sharing a term never conflict.
const (
	docPrefix  = "doc/"
	hashPrefix = "hash/"
	termPrefix = "term/"
	linkPrefix = "link/"

	colContent   = "content"
	colLoaded    = "loaded"
	colParsed    = "parsed"
	colHash      = "hash"
	colCanonical = "canonical"
	colMembers   = "members"
	colPosting   = "posting"
	colFrom      = "from"
	colIndexed   = "indexed" // JSON {"words":[...],"links":[...]}: what terms last wrote
)

// Observer names.
const (
	ObsDocument = "document"
	ObsCluster  = "cluster"
	ObsTerms    = "terms"
)

// Register registers the pipeline's observers on db.
func Register(ctx context.Context, db *percolator.DB) error {
	for _, o := range []percolator.Observer{
		{Name: ObsDocument, Column: colContent, Fn: document},
		{Name: ObsCluster, Column: colMembers, Fn: cluster},
		{Name: ObsTerms, Column: colCanonical, Fn: terms},
	} {
		if err := db.Observe(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func getOpt(ctx context.Context, tx *percolator.Txn, row, col string) ([]byte, bool, error) {
	v, err := tx.Get(ctx, row, col)
	if errors.Is(err, percolator.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// document parses doc/<path>'s content and moves the path between hash
// clusters.
func document(ctx context.Context, tx *percolator.Txn, row, _ string) error {
	path := strings.TrimPrefix(row, docPrefix)
	content, ok, err := getOpt(ctx, tx, row, colContent)
	if err != nil {
		return err
	}
	oldHash, _, err := getOpt(ctx, tx, row, colHash)
	if err != nil {
		return err
	}
	newHash := ""
	if ok {
		d := Parse(path, content)
		newHash = d.Hash
		parsed, _ := json.Marshal(d)
		if err := tx.Set(row, colParsed, parsed); err != nil {
			return err
		}
		if err := tx.Set(row, colHash, []byte(newHash)); err != nil {
			return err
		}
	} else {
		for _, col := range []string{colParsed, colHash, colCanonical} {
			if err := tx.Delete(row, col); err != nil {
				return err
			}
		}
	}
	if string(oldHash) == newHash {
		return nil
	}
	if len(oldHash) > 0 {
		if err := editMembers(ctx, tx, string(oldHash), path, false); err != nil {
			return err
		}
	}
	if newHash != "" {
		return editMembers(ctx, tx, newHash, path, true)
	}
	return nil
}

func editMembers(ctx context.Context, tx *percolator.Txn, hash, path string, add bool) error {
	row := hashPrefix + hash
	v, _, err := getOpt(ctx, tx, row, colMembers)
	if err != nil {
		return err
	}
	var members []string
	if len(v) > 0 {
		if err := json.Unmarshal(v, &members); err != nil {
			return err
		}
	}
	i, found := slices.BinarySearch(members, path)
	switch {
	case add && !found:
		members = slices.Insert(members, i, path)
	case !add && found:
		members = slices.Delete(members, i, i+1)
	default:
		return nil
	}
	if len(members) == 0 {
		return tx.Delete(row, colMembers)
	}
	b, _ := json.Marshal(members)
	return tx.Set(row, colMembers, b)
}

// cluster marks every member of hash/<hash> canonical or not. Each flag is
// written even if unchanged: the write is what tells terms that the
// member's content (which moved it into this cluster) changed.
func cluster(ctx context.Context, tx *percolator.Txn, row, _ string) error {
	v, ok, err := getOpt(ctx, tx, row, colMembers)
	if err != nil || !ok {
		return err
	}
	var members []string
	if err := json.Unmarshal(v, &members); err != nil {
		return err
	}
	for i, m := range members {
		flag := "0"
		if i == 0 {
			flag = "1"
		}
		if err := tx.Set(docPrefix+m, colCanonical, []byte(flag)); err != nil {
			return err
		}
	}
	return nil
}

type contribution struct {
	Words []string `json:"words"`
	Links []string `json:"links"`
}

// terms replaces the postings and links doc/<path> contributes.
func terms(ctx context.Context, tx *percolator.Txn, row, _ string) error {
	path := strings.TrimPrefix(row, docPrefix)
	var want contribution
	flag, _, err := getOpt(ctx, tx, row, colCanonical)
	if err != nil {
		return err
	}
	if string(flag) == "1" {
		parsed, ok, err := getOpt(ctx, tx, row, colParsed)
		if err != nil {
			return err
		}
		if ok {
			var d Doc
			if err := json.Unmarshal(parsed, &d); err != nil {
				return err
			}
			want = contribution{Words: d.Words, Links: d.Links}
		}
	}
	var had contribution
	if v, ok, err := getOpt(ctx, tx, row, colIndexed); err != nil {
		return err
	} else if ok {
		if err := json.Unmarshal(v, &had); err != nil {
			return err
		}
	}
	apply := func(old, cur []string, key func(string) string, col string) error {
		for _, w := range old {
			if _, found := slices.BinarySearch(cur, w); !found {
				if err := tx.Delete(key(w), col); err != nil {
					return err
				}
			}
		}
		for _, w := range cur {
			if _, found := slices.BinarySearch(old, w); !found {
				if err := tx.Set(key(w), col, []byte{1}); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := apply(had.Words, want.Words, func(w string) string { return termPrefix + w + "/" + path }, colPosting); err != nil {
		return err
	}
	if err := apply(had.Links, want.Links, func(t string) string { return linkPrefix + t + "\x00" + path }, colFrom); err != nil {
		return err
	}
	if len(want.Words) == 0 && len(want.Links) == 0 {
		return tx.Delete(row, colIndexed)
	}
	b, _ := json.Marshal(want)
	return tx.Set(row, colIndexed, b)
}

// SyncStats counts what Sync did.
type SyncStats struct {
	New, Changed, Deleted, Unchanged int
}

// Sync makes the stored corpus equal files: new and changed files are
// written, files no longer present deleted, each in a loader transaction
// (opts bounds the concurrency and reports progress over the files to
// write).
func Sync(ctx context.Context, db *percolator.DB, files map[string][]byte, opts percolator.LoadOptions) (SyncStats, error) {
	var st SyncStats
	loaded := map[string]string{}
	err := db.View(ctx, func(tx *percolator.Txn) error {
		kvs, err := tx.Scan(ctx, docPrefix, prefixEnd(docPrefix), colLoaded, 0)
		for _, kv := range kvs {
			loaded[strings.TrimPrefix(string(kv.Row), docPrefix)] = string(kv.Value)
		}
		return err
	})
	if err != nil {
		return st, err
	}
	type item struct {
		path    string
		content []byte // nil: delete
		hash    string
	}
	var items []item
	for p, c := range files {
		if !Indexable(p) {
			continue
		}
		h := hashOf(c)
		old, was := loaded[p]
		switch {
		case !was:
			st.New++
		case old != h:
			st.Changed++
		default:
			st.Unchanged++
			continue
		}
		items = append(items, item{path: p, content: c, hash: h})
	}
	for p := range loaded {
		if _, ok := files[p]; !ok || !Indexable(p) {
			st.Deleted++
			items = append(items, item{path: p})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].path < items[j].path })
	err = db.Load(ctx, len(items), opts, func(tx *percolator.Txn, i int) error {
		it := items[i]
		row := docPrefix + it.path
		if it.content == nil {
			if err := tx.Delete(row, colContent); err != nil {
				return err
			}
			return tx.Delete(row, colLoaded)
		}
		if err := tx.Set(row, colContent, it.content); err != nil {
			return err
		}
		return tx.Set(row, colLoaded, []byte(it.hash))
	})
	return st, err
}

// Export reads the incremental index back in Build's shape, from one
// snapshot.
func Export(ctx context.Context, db *percolator.DB) (*Index, error) {
	ix := &Index{Docs: map[string]Doc{}, Canonical: map[string]string{}, Terms: map[string][]string{}, InLinks: map[string]int{}}
	err := db.View(ctx, func(tx *percolator.Txn) error {
		kvs, err := tx.Scan(ctx, docPrefix, prefixEnd(docPrefix), colParsed, 0)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			var d Doc
			if err := json.Unmarshal(kv.Value, &d); err != nil {
				return err
			}
			ix.Docs[strings.TrimPrefix(string(kv.Row), docPrefix)] = d
		}
		if kvs, err = tx.Scan(ctx, hashPrefix, prefixEnd(hashPrefix), colMembers, 0); err != nil {
			return err
		}
		for _, kv := range kvs {
			var members []string
			if err := json.Unmarshal(kv.Value, &members); err != nil {
				return err
			}
			if len(members) > 0 {
				ix.Canonical[strings.TrimPrefix(string(kv.Row), hashPrefix)] = members[0]
			}
		}
		if kvs, err = tx.Scan(ctx, termPrefix, prefixEnd(termPrefix), colPosting, 0); err != nil {
			return err
		}
		for _, kv := range kvs {
			term, path, _ := strings.Cut(strings.TrimPrefix(string(kv.Row), termPrefix), "/")
			ix.Terms[term] = append(ix.Terms[term], path)
		}
		if kvs, err = tx.Scan(ctx, linkPrefix, prefixEnd(linkPrefix), colFrom, 0); err != nil {
			return err
		}
		for _, kv := range kvs {
			target, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Row), linkPrefix), "\x00")
			ix.InLinks[target]++
		}
		return nil
	})
	for _, paths := range ix.Terms {
		sort.Strings(paths)
	}
	return ix, err
}

// Query returns the canonical paths whose document has word, from the
// incremental index.
func Query(ctx context.Context, db *percolator.DB, word string) ([]string, error) {
	word = strings.ToLower(word)
	var paths []string
	err := db.View(ctx, func(tx *percolator.Txn) error {
		start := termPrefix + word + "/"
		kvs, err := tx.Scan(ctx, start, prefixEnd(start), colPosting, 0)
		for _, kv := range kvs {
			paths = append(paths, strings.TrimPrefix(string(kv.Row), start))
		}
		return err
	})
	return paths, err
}

// Title returns the stored title of path ("" if none).
func Title(ctx context.Context, db *percolator.DB, path string) (string, error) {
	var title string
	err := db.View(ctx, func(tx *percolator.Txn) error {
		v, ok, err := getOpt(ctx, tx, docPrefix+path, colParsed)
		if err != nil || !ok {
			return err
		}
		var d Doc
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		title = d.Title
		return nil
	})
	return title, err
}

// prefixEnd is the first row after every row beginning with p.
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }
