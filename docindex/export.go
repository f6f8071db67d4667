package docindex

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/seed-992972ee/percolator"
)

// Export reads the incremental index back in Build's shape, from one
// snapshot. It reads the whole index: for the summary counts use
// CountIndex.
func Export(ctx context.Context, db *percolator.DB) (*Index, error) { return export(ctx, db, nil) }

// exportPage is how many rows export reads at a time.
const exportPage = 1024

// export is Export telling read (if set) the rows read so far after each
// page.
func export(ctx context.Context, db *percolator.DB, read func(n int64)) (*Index, error) {
	ix := &Index{Docs: map[string]Doc{}, Canonical: map[string]string{}, Terms: map[string][]string{}, InLinks: map[string]int{}}
	err := db.View(ctx, func(tx *percolator.Txn) error {
		s := &pagedScan{tx: tx, read: read}
		return firstErr(
			func() error { return exportDocs(ctx, s, ix) },
			func() error { return exportCanonical(ctx, s, ix) },
			func() error { return exportTerms(ctx, s, ix) },
			func() error { return exportLinks(ctx, s, ix) },
		)
	})
	for _, paths := range ix.Terms {
		slices.Sort(paths)
	}
	return ix, err
}

// scanPrefix returns the values of col in the rows starting with prefix.
func scanPrefix(ctx context.Context, tx *percolator.Txn, prefix, col string) ([]percolator.KV, error) {
	return tx.Scan(ctx, prefix, prefixEnd(prefix), col, 0)
}

// pagedScan reads the values of a column in the rows with a prefix, a
// page at a time, telling read (if set) the rows read so far after each
// page.
type pagedScan struct {
	tx   *percolator.Txn
	read func(n int64)
	n    int64
}

func (s *pagedScan) scan(ctx context.Context, prefix, col string) ([]percolator.KV, error) {
	var all []percolator.KV
	for start, end := prefix, prefixEnd(prefix); ; {
		kvs, err := s.tx.Scan(ctx, start, end, col, exportPage)
		all = append(all, kvs...)
		if s.n += int64(len(kvs)); s.read != nil {
			s.read(s.n)
		}
		if err != nil || len(kvs) < exportPage {
			return all, err
		}
		start = string(kvs[len(kvs)-1].Row) + "\x00"
	}
}

func exportDocs(ctx context.Context, s *pagedScan, ix *Index) error {
	kvs, err := s.scan(ctx, docPrefix, colParsed)
	for _, kv := range kvs {
		d, err := decodeDoc(kv.Value)
		if err != nil {
			return fmt.Errorf("%q %s: %w", kv.Row, colParsed, err)
		}
		ix.Docs[strings.TrimPrefix(string(kv.Row), docPrefix)] = d
	}
	return err
}

func exportCanonical(ctx context.Context, s *pagedScan, ix *Index) error {
	kvs, err := s.scan(ctx, hashPrefix, colMembers)
	for _, kv := range kvs {
		members, err := decodeList(kv.Value)
		if err != nil {
			return fmt.Errorf("%q %s: %w", kv.Row, colMembers, err)
		}
		if len(members) > 0 {
			ix.Canonical[strings.TrimPrefix(string(kv.Row), hashPrefix)] = members[0]
		}
	}
	return err
}

func exportTerms(ctx context.Context, s *pagedScan, ix *Index) error {
	kvs, err := s.scan(ctx, termPrefix, colPosting)
	for _, kv := range kvs {
		term, path, ok := splitPosting(string(kv.Row))
		if !ok {
			return fmt.Errorf("%w: posting row %q", ErrCorrupt, kv.Row)
		}
		ix.Terms[term] = append(ix.Terms[term], path)
	}
	return err
}

func exportLinks(ctx context.Context, s *pagedScan, ix *Index) error {
	kvs, err := s.scan(ctx, linkPrefix, colFrom)
	for _, kv := range kvs {
		ix.InLinks[string(kv.Value)]++ // the value is the target
	}
	return err
}

// Query returns the canonical paths whose document has word (lowercased),
// from the incremental index.
func Query(ctx context.Context, db *percolator.DB, word string) ([]string, error) {
	word = strings.ToLower(word)
	if word == "" || strings.Contains(word, "/") {
		return nil, nil // not a term: terms are letters and digits
	}
	var paths []string
	err := db.View(ctx, func(tx *percolator.Txn) error {
		start := postingPrefix(word)
		kvs, err := scanPrefix(ctx, tx, start, colPosting)
		for _, kv := range kvs {
			paths = append(paths, strings.TrimPrefix(string(kv.Row), start))
		}
		return err
	})
	return paths, err
}

// Title returns the stored title of path ("" if none): the bytes of the
// document, which need not be UTF-8.
func Title(ctx context.Context, db *percolator.DB, path string) (string, error) {
	var title string
	err := db.View(ctx, func(tx *percolator.Txn) error {
		v, ok, err := getOpt(ctx, tx, docRow(path), colParsed)
		if err != nil || !ok {
			return err
		}
		d, err := decodeDoc(v)
		title = d.Title
		return err
	})
	return title, err
}

// StoredContents returns the content the index holds for each path
// keep selects (all with a nil keep): what it indexed for files a sync
// skipped as bad, to build a batch reference with.
func StoredContents(ctx context.Context, db *percolator.DB, keep func(path string) bool) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := db.View(ctx, func(tx *percolator.Txn) error {
		kvs, err := scanPrefix(ctx, tx, docPrefix, colContent)
		for _, kv := range kvs {
			if p := strings.TrimPrefix(string(kv.Row), docPrefix); keep == nil || keep(p) {
				out[p] = kv.Value
			}
		}
		return err
	})
	return out, err
}

// Reference returns the files a batch build must index to equal what a
// Sync of files with bad files bad left in db: the contents of files
// (read again), and for the bad ones, and those under a bad directory,
// what the index holds for them. It reports the files it could not read
// again as bad.
func Reference(ctx context.Context, db *percolator.DB, files []File, bad []BadFile) (map[string][]byte, []BadFile, error) {
	return reference(ctx, db, files, bad, nil)
}

// reference is Reference telling read (if set) the files read again so
// far, of how many: 0 before the first, then after each.
func reference(ctx context.Context, db *percolator.DB, files []File, bad []BadFile, read func(done, total int)) (map[string][]byte, []BadFile, error) {
	set := newBadSet(bad)
	var good []File
	for _, f := range files {
		if !set.covers(f.Path) {
			good = append(good, f)
		}
	}
	ref, unread := readFiles(ctx, good, read)
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	kept, err := StoredContents(ctx, db, set.covers)
	for p, c := range kept {
		ref[p] = c
	}
	return ref, unread, err
}
