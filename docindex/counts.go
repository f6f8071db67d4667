package docindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-992972ee/percolator"
)

// # Counts
//
// The summary counts (documents, terms, duplicate clusters) are exact and
// cost what changed, not the index: each entity that can be counted has a
// flag that says whether it is (doc/<path> counted, which holds the hash
// the document was counted with; hash/<hash> dup; termflags/<first byte>
// #<term>), the counts are the sums of the flags (meta row), and a fold
// sets the flags of the entities that changed since the last fold to what
// the index now holds, adjusting the counts.
//
// The terms observer records what changed, in the same transaction as its
// own changes, in dirty/<path>: doc (the path) and words (the terms whose
// posting for the path it set or deleted, each with the latest
// direction). Every change of a document's presence or hash is followed by
// a terms run on its path (the cluster rewrites the canonical flag of every
// member of both clusters; a delete deletes the flag), so marking there
// covers documents and clusters too, and the document observer writes
// nothing more. The marks are cells of the path's own row: no conflict
// between runs of different paths. Fold (run by CountIndex, serially)
// takes dirty cells in batches, each in one transaction that recomputes
// each entity from the index at its snapshot (a document's presence and
// the clusters of its counted and current hashes; a term's postings),
// updates flags and counts, and deletes the dirty cells it took. So:
//
//  1. Every change that can move a count leaves its entity in a dirty
//     cell (once the terms run that follows it commits) until a fold has
//     recomputed it at a snapshot that includes the change: a dirty cell
//     rewritten after the fold's snapshot makes the fold's delete
//     conflict, and the fold retries.
//  2. A fold recomputes, it does not add up deltas, so seeing an entity
//     twice is harmless. A term whose latest direction in a dirty cell is
//     "set" has a posting at the fold's snapshot, so it is present without
//     a scan; any other is present iff a scan of its postings finds one.
//  3. Every fold writes the counts row, so folds are serialized by their
//     conflicts on it: none commits a recomputation older than another's.
//
// At quiescence (every observer run done, no dirty cell) every flag equals
// what the index holds, so the counts equal those of Export.
//
// Rejected: counters updated by the observers themselves. A shared counter
// cell is written by nearly every run (every document has the term "the"),
// so concurrent runs conflict and the pipeline runs one run at a time; and
// updating a term's flag only on the transitions a run sees is a write
// skew under snapshot isolation (a run removing the last posting and one
// adding the first each see the other's state and neither corrects it).
const (
	metaRow       = "meta/docindex"
	colFormat     = "format"
	formatVersion = "2" // 1: JSON values, unbounded link keys
	colDocuments  = "documents"
	colTerms      = "terms"
	colClusters   = "clusters"
	colFolds      = "folds"

	colDirtyDoc   = "doc"
	colDirtyWords = "words"
	colCounted    = "counted"
	colDup        = "dup"

	// foldBatch bounds the dirty cells of each kind one fold transaction
	// takes.
	foldBatch = 128
)

// ErrFormat is wrapped by Register's error for a store that holds an
// index of another format.
var ErrFormat = errors.New("docindex: the store holds an index of another format")

// Counts are the summary counts of an index: for an Index ix, documents
// len(ix.Docs), terms len(ix.Terms), clusters len(ix.Dups()).
type Counts struct {
	Documents, Terms, Clusters int64
}

// stored is the counts row: the counts and the number of folds so far.
type stored struct {
	Counts
	folds int64
}

// Counts returns the summary counts of ix.
func (ix *Index) Counts() Counts {
	return Counts{Documents: int64(len(ix.Docs)), Terms: int64(len(ix.Terms)), Clusters: int64(len(ix.Dups()))}
}

// HasIndex reports whether db holds an index (Register ran on it).
func HasIndex(ctx context.Context, db *percolator.DB) (bool, error) {
	var ok bool
	err := db.View(ctx, func(tx *percolator.Txn) error {
		var err error
		_, ok, err = getOpt(ctx, tx, metaRow, colFormat)
		return err
	})
	return ok, err
}

// checkFormat marks a store without an index as holding this format, and
// refuses one whose index has another.
func checkFormat(ctx context.Context, db *percolator.DB) error {
	return db.Update(ctx, func(tx *percolator.Txn) error {
		v, ok, err := getOpt(ctx, tx, metaRow, colFormat)
		switch {
		case err != nil:
			return err
		case ok && string(v) != formatVersion:
			return fmt.Errorf("%w: format %q, this program reads %q; index into a new directory", ErrFormat, v, formatVersion)
		case ok:
			return nil
		}
		docs, err := tx.Scan(ctx, docPrefix, prefixEnd(docPrefix), colContent, 1)
		if err != nil {
			return err
		}
		if len(docs) > 0 {
			return fmt.Errorf("%w: an index written before formats were marked; index into a new directory", ErrFormat)
		}
		return tx.Set(metaRow, colFormat, []byte(formatVersion))
	})
}

// markDirty records, in dirty/<path>, that path's run of terms changed
// what it indexes, and the terms whose posting for path it set or deleted,
// keeping each term's latest direction.
func markDirty(ctx context.Context, tx *percolator.Txn, path string, set, deleted []string) error {
	row := dirtyRow(path)
	if err := tx.Set(row, colDirtyDoc, []byte{1}); err != nil {
		return err
	}
	if len(set) == 0 && len(deleted) == 0 {
		return nil
	}
	v, ok, err := getOpt(ctx, tx, row, colDirtyWords)
	if err != nil {
		return err
	}
	now := contribution{Words: set, Links: deleted} // Words: set, Links: deleted
	if ok {
		had, err := decodeContribution(v)
		if err != nil {
			return fmt.Errorf("%q %s: %w", row, colDirtyWords, err)
		}
		now = contribution{Words: union(minus(had.Words, deleted), set), Links: union(minus(had.Links, set), deleted)}
	}
	return tx.Set(row, colDirtyWords, encodeContribution(now))
}

// union returns the sorted union of the sorted lists a and b.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// minus returns the sorted a without the items of the sorted b.
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}

// CountIndex folds what the observers changed into the stored counts (in
// batches, each one transaction) and returns the counts. Its cost is in
// proportion to the entities changed since the last fold. Run while the
// observers are quiescent, the counts equal those of Export; run while
// they work, they count a consistent past state and later folds catch up.
func CountIndex(ctx context.Context, db *percolator.DB) (Counts, error) {
	return countIndex(ctx, db, nil)
}

// countIndex is CountIndex telling folded (if set) the dirty rows folded
// so far after each batch.
func countIndex(ctx context.Context, db *percolator.DB, folded func(n int64)) (Counts, error) {
	cache := &flagCache{folds: -1}
	var n int64
	for {
		var f *fold
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			var err error
			f, err = foldOnce(ctx, tx, cache)
			return err
		})
		if err != nil {
			return Counts{}, fmt.Errorf("docindex: counting: %w", err)
		}
		cache.committed(f)
		if n += int64(len(f.dirtyDocs) + len(f.dirtyWordsRows)); folded != nil {
			folded(n)
		}
		if !f.more() {
			break
		}
	}
	return StoredCounts(ctx, db)
}

// StoredCounts returns the counts as of the last fold, without folding.
func StoredCounts(ctx context.Context, db *percolator.DB) (Counts, error) {
	var c stored
	err := db.View(ctx, func(tx *percolator.Txn) error {
		var err error
		c, err = readCounts(ctx, tx)
		return err
	})
	return c.Counts, err
}

// flagCache holds the flags the folds of one CountIndex wrote, so that
// the next batches need not read them again: valid while no other fold
// committed in between, which the fold count tells (every fold writes it).
type flagCache struct {
	folds int64
	flags map[cell]bool
}

type cell struct{ row, col string }

// committed adds what the committed fold f wrote.
func (c *flagCache) committed(f *fold) {
	if c.folds != f.folds {
		c.flags = map[cell]bool{}
	}
	for k, v := range f.flags {
		c.flags[k] = v
	}
	c.folds = f.folds + 1
}

// fold is one batch of dirty entities.
type fold struct {
	paths          []string
	set, unsure    map[string]bool // terms: with a "set" direction; any other
	dirtyDocs      []string        // the dirty rows taken, per column
	dirtyWordsRows []string

	folds  int64         // the fold count this fold read
	cached map[cell]bool // flags known without a read (nil if none)
	flags  map[cell]bool // flags this fold wrote or read
}

// more reports whether dirty cells may be left after f.
func (f *fold) more() bool {
	return len(f.dirtyDocs) == foldBatch || len(f.dirtyWordsRows) == foldBatch
}

// foldOnce folds one batch of dirty cells.
func foldOnce(ctx context.Context, tx *percolator.Txn, cache *flagCache) (*fold, error) {
	f, err := takeDirty(ctx, tx)
	if err != nil {
		return nil, err
	}
	c, err := readCounts(ctx, tx)
	if err != nil {
		return nil, err
	}
	f.folds = c.folds
	if cache.folds == c.folds {
		f.cached = cache.flags
	}
	if err := f.recount(ctx, tx, &c.Counts); err != nil {
		return nil, err
	}
	if err := f.clear(tx); err != nil {
		return nil, err
	}
	c.folds++
	return f, writeCounts(tx, c)
}

// takeDirty reads a batch of dirty cells of each kind.
func takeDirty(ctx context.Context, tx *percolator.Txn) (*fold, error) {
	f := &fold{set: map[string]bool{}, unsure: map[string]bool{}, flags: map[cell]bool{}}
	docs, err := tx.Scan(ctx, dirtyPrefix, prefixEnd(dirtyPrefix), colDirtyDoc, foldBatch)
	if err != nil {
		return nil, err
	}
	for _, kv := range docs {
		f.dirtyDocs = append(f.dirtyDocs, string(kv.Row))
		f.paths = append(f.paths, strings.TrimPrefix(string(kv.Row), dirtyPrefix))
	}
	words, err := tx.Scan(ctx, dirtyPrefix, prefixEnd(dirtyPrefix), colDirtyWords, foldBatch)
	if err != nil {
		return nil, err
	}
	for _, kv := range words {
		c, err := decodeContribution(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%q %s: %w", kv.Row, colDirtyWords, err)
		}
		f.dirtyWordsRows = append(f.dirtyWordsRows, string(kv.Row))
		for _, w := range c.Words {
			f.set[w] = true
		}
		for _, w := range c.Links {
			f.unsure[w] = true
		}
	}
	return f, nil
}

// recount recomputes every entity of the batch and adjusts c.
func (f *fold) recount(ctx context.Context, tx *percolator.Txn, c *Counts) error {
	hashes := map[string]bool{}
	for _, p := range f.paths {
		if err := f.recountDoc(ctx, tx, p, c, hashes); err != nil {
			return err
		}
	}
	for h := range hashes {
		members, err := getList(ctx, tx, hashRow(h), colMembers)
		if err != nil {
			return err
		}
		if err := f.flag(ctx, tx, hashRow(h), colDup, len(members) >= 2, &c.Clusters); err != nil {
			return err
		}
	}
	return f.recountTerms(ctx, tx, c)
}

// recountDoc recomputes whether path is a document, records the hash it is
// counted with, and adds to hashes the clusters it left or joined.
func (f *fold) recountDoc(ctx context.Context, tx *percolator.Txn, path string, c *Counts, hashes map[string]bool) error {
	row := docRow(path)
	hash, present, err := getOpt(ctx, tx, row, colHash)
	if err != nil {
		return err
	}
	counted, was, err := getOpt(ctx, tx, row, colCounted)
	if err != nil {
		return err
	}
	switch {
	case present && was && string(hash) == string(counted):
		return nil
	case present && !was:
		c.Documents++
	case !present && was:
		c.Documents--
	}
	for _, h := range [][]byte{hash, counted} {
		if len(h) > 0 {
			hashes[string(h)] = true
		}
	}
	if present {
		return tx.Set(row, colCounted, hash)
	}
	return tx.Delete(row, colCounted)
}

func (f *fold) recountTerms(ctx context.Context, tx *percolator.Txn, c *Counts) error {
	for w := range f.unsure {
		if f.set[w] {
			continue
		}
		kvs, err := tx.Scan(ctx, postingPrefix(w), prefixEnd(postingPrefix(w)), colPosting, 1)
		if err != nil {
			return err
		}
		row, col := termFlagCell(w)
		if err := f.flag(ctx, tx, row, col, len(kvs) > 0, &c.Terms); err != nil {
			return err
		}
	}
	for w := range f.set {
		row, col := termFlagCell(w)
		if err := f.flag(ctx, tx, row, col, true, &c.Terms); err != nil {
			return err
		}
	}
	return nil
}

// flag sets the flag (row, col) to present, adjusting n by the change.
func (f *fold) flag(ctx context.Context, tx *percolator.Txn, row, col string, present bool, n *int64) error {
	k := cell{row, col}
	was, known := f.cached[k]
	if !known {
		var err error
		if _, was, err = getOpt(ctx, tx, row, col); err != nil {
			return err
		}
	}
	f.flags[k] = present
	switch {
	case present && !was:
		*n++
		return tx.Set(row, col, []byte{1})
	case !present && was:
		*n--
		return tx.Delete(row, col)
	}
	return nil
}

// clear deletes the dirty cells the batch took.
func (f *fold) clear(tx *percolator.Txn) error {
	for _, row := range f.dirtyDocs {
		if err := tx.Delete(row, colDirtyDoc); err != nil {
			return err
		}
	}
	for _, row := range f.dirtyWordsRows {
		if err := tx.Delete(row, colDirtyWords); err != nil {
			return err
		}
	}
	return nil
}

func readCounts(ctx context.Context, tx *percolator.Txn) (stored, error) {
	var c stored
	for _, f := range c.fields() {
		v, ok, err := getOpt(ctx, tx, metaRow, f.col)
		switch {
		case err != nil:
			return c, err
		case ok && len(v) != 8:
			return c, fmt.Errorf("%w: counter %s of %d bytes", ErrCorrupt, f.col, len(v))
		case ok:
			*f.n = int64(binary.BigEndian.Uint64(v))
		}
	}
	return c, nil
}

// writeCounts writes every counter, changed or not: the writes serialize
// the folds (Counts, 3).
func writeCounts(tx *percolator.Txn, c stored) error {
	for _, f := range c.fields() {
		if err := tx.Set(metaRow, f.col, binary.BigEndian.AppendUint64(nil, uint64(*f.n))); err != nil {
			return err
		}
	}
	return nil
}

type counterField struct {
	col string
	n   *int64
}

func (c *stored) fields() []counterField {
	return []counterField{{colDocuments, &c.Documents}, {colTerms, &c.Terms}, {colClusters, &c.Clusters}, {colFolds, &c.folds}}
}
