package docindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-992972ee/percolator"
)

// The incremental index is a chain of observers over these rows (the
// paper's indexing pipeline in miniature; keys.go has their encoding):
//
//	doc/<path>           content (loader), loaded (loader: content hash
//	                     and file stat), parsed (encoded Doc), hash,
//	                     canonical ("1" or "0"), indexed (what terms last
//	                     wrote), counted (the hash it was last counted
//	                     with, counts.go)
//	hash/<hash>          members (sorted paths with that content), dup
//	term/<term>/<path>   posting: a canonical doc has the term
//	termflags/<byte>     #<term>: counted (counts.go)
//	link/<target key><source>  from (the target): a canonical doc links
//	                     to target
//	dirty/<path>         doc, words: the path, and the terms whose
//	                     postings for it changed, since the counts were
//	                     last folded (counts.go)
//	meta/docindex        format, and the counts
//
// document (on content) parses the file and moves it between hash
// clusters; cluster (on members) marks each member canonical or not, the
// smallest path of the cluster being canonical (the paper's Figure 2);
// terms (on canonical) replaces the postings and links the doc contributes:
// its words and links if it is canonical, nothing otherwise. Postings are
// cells of their own, so documents sharing a term never conflict. Every
// stored value is binary (encode.go): user bytes stay bytes.
const (
	colContent   = "content"
	colLoaded    = "loaded"
	colParsed    = "parsed"
	colHash      = "hash"
	colCanonical = "canonical"
	colMembers   = "members"
	colPosting   = "posting"
	colFrom      = "from"
	colIndexed   = "indexed"
)

// Observer names.
const (
	ObsDocument = "document"
	ObsCluster  = "cluster"
	ObsTerms    = "terms"
)

// Register checks that the store holds no index of another format and
// registers the pipeline's observers on db.
func Register(ctx context.Context, db *percolator.DB) error {
	if err := checkFormat(ctx, db); err != nil {
		return err
	}
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
		newHash, err = storeParsed(tx, row, path, content)
	} else {
		err = deleteColumns(tx, row, colParsed, colHash, colCanonical)
	}
	if err != nil || string(oldHash) == newHash {
		return err
	}
	return moveCluster(ctx, tx, path, string(oldHash), newHash)
}

// storeParsed writes the parsed doc and its hash, and returns the hash.
func storeParsed(tx *percolator.Txn, row, path string, content []byte) (string, error) {
	d := Parse(path, content)
	if err := tx.Set(row, colParsed, encodeDoc(d)); err != nil {
		return "", err
	}
	return d.Hash, tx.Set(row, colHash, []byte(d.Hash))
}

func deleteColumns(tx *percolator.Txn, row string, cols ...string) error {
	for _, col := range cols {
		if err := tx.Delete(row, col); err != nil {
			return err
		}
	}
	return nil
}

// moveCluster moves path from the cluster of oldHash to that of newHash
// ("" for none).
func moveCluster(ctx context.Context, tx *percolator.Txn, path, oldHash, newHash string) error {
	for _, h := range []string{oldHash, newHash} {
		if h == "" {
			continue
		}
		if err := editMembers(ctx, tx, h, path, h == newHash); err != nil {
			return err
		}
	}
	return nil
}

func editMembers(ctx context.Context, tx *percolator.Txn, hash, path string, add bool) error {
	row := hashRow(hash)
	members, err := getList(ctx, tx, row, colMembers)
	if err != nil {
		return err
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
	return tx.Set(row, colMembers, encodeList(members))
}

// getList reads a stored sorted list; absent is empty.
func getList(ctx context.Context, tx *percolator.Txn, row, col string) ([]string, error) {
	v, ok, err := getOpt(ctx, tx, row, col)
	if err != nil || !ok {
		return nil, err
	}
	ss, err := decodeList(v)
	if err != nil {
		return nil, fmt.Errorf("%q %s: %w", row, col, err)
	}
	return ss, nil
}

// cluster marks every member of hash/<hash> canonical or not. Each flag is
// written even if unchanged: the write is what tells terms that the
// member's content (which moved it into this cluster) changed.
func cluster(ctx context.Context, tx *percolator.Txn, row, _ string) error {
	members, err := getList(ctx, tx, row, colMembers)
	if err != nil {
		return err
	}
	for i, m := range members {
		flag := "0"
		if i == 0 {
			flag = "1"
		}
		if err := tx.Set(docRow(m), colCanonical, []byte(flag)); err != nil {
			return err
		}
	}
	return nil
}

// terms replaces the postings and links doc/<path> contributes.
func terms(ctx context.Context, tx *percolator.Txn, row, _ string) error {
	path := strings.TrimPrefix(row, docPrefix)
	want, err := wantedContribution(ctx, tx, row)
	if err != nil {
		return err
	}
	had, err := indexedContribution(ctx, tx, row)
	if err != nil {
		return err
	}
	added, removed, err := apply(tx, had.Words, want.Words, func(w string) (string, []byte) { return postingRow(w, path), []byte{1} }, colPosting)
	if err != nil {
		return err
	}
	if _, _, err := apply(tx, had.Links, want.Links, func(t string) (string, []byte) { return linkRow(t, path), []byte(t) }, colFrom); err != nil {
		return err
	}
	if err := markDirty(ctx, tx, path, added, removed); err != nil {
		return err
	}
	if len(want.Words) == 0 && len(want.Links) == 0 {
		return tx.Delete(row, colIndexed)
	}
	return tx.Set(row, colIndexed, encodeContribution(want))
}

// wantedContribution is what doc/<path> should contribute: its words and
// links if it is canonical, nothing otherwise.
func wantedContribution(ctx context.Context, tx *percolator.Txn, row string) (contribution, error) {
	flag, _, err := getOpt(ctx, tx, row, colCanonical)
	if err != nil || string(flag) != "1" {
		return contribution{}, err
	}
	parsed, ok, err := getOpt(ctx, tx, row, colParsed)
	if err != nil || !ok {
		return contribution{}, err
	}
	d, err := decodeDoc(parsed)
	if err != nil {
		return contribution{}, fmt.Errorf("%q %s: %w", row, colParsed, err)
	}
	return contribution{Words: d.Words, Links: d.Links}, nil
}

// indexedContribution is what terms last wrote for doc/<path>.
func indexedContribution(ctx context.Context, tx *percolator.Txn, row string) (contribution, error) {
	v, ok, err := getOpt(ctx, tx, row, colIndexed)
	if err != nil || !ok {
		return contribution{}, err
	}
	c, err := decodeContribution(v)
	if err != nil {
		return contribution{}, fmt.Errorf("%q %s: %w", row, colIndexed, err)
	}
	return c, nil
}

// apply deletes the cells of the items of old not in cur and sets those of
// cur not in old (both sorted), and returns the items it set and those it
// deleted, each sorted.
func apply(tx *percolator.Txn, old, cur []string, cell func(string) (string, []byte), col string) (set, deleted []string, err error) {
	for _, w := range old {
		if _, found := slices.BinarySearch(cur, w); !found {
			row, _ := cell(w)
			if err := tx.Delete(row, col); err != nil {
				return nil, nil, err
			}
			deleted = append(deleted, w)
		}
	}
	for _, w := range cur {
		if _, found := slices.BinarySearch(old, w); !found {
			row, v := cell(w)
			if err := tx.Set(row, col, v); err != nil {
				return nil, nil, err
			}
			set = append(set, w)
		}
	}
	return set, deleted, nil
}
