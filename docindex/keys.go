package docindex

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/storage"
)

// Row keys of the incremental index. Every key built from user bytes
// (paths, terms, link targets, which may hold any byte, NUL and 0xFF
// included) is unambiguous and bounded:
//
//	doc/<path>                 a prefix, then the path to the end of the key
//	dirty/<path>               likewise
//	hash/<hex sha-256>         fixed length
//	term/<term>/<path>         a term has only letters and digits, so no "/":
//	                           the first "/" after the prefix ends the term
//	termflags/<byte>           a prefix and one byte; "#" and the term is the
//	                           column
//	link/<target key><source>  the target key has its own length (below)
//
// A link target of up to maxKeyTarget bytes is kept in the key as "p", a
// 2-byte big-endian length and the target; a longer one as "h" and its
// SHA-256, so a link row never exceeds the row key limit whatever the
// href. Either way the cell's value is the target itself. Paths are
// bounded by MaxPathSize, which leaves room for the longest of these.
const (
	docPrefix      = "doc/"
	dirtyPrefix    = "dirty/"
	hashPrefix     = "hash/"
	termPrefix     = "term/"
	termFlagPrefix = "termflags/"
	linkPrefix     = "link/"

	// maxKeyTarget is the longest link target kept whole in a row key.
	maxKeyTarget = 256
	// linkKeyMax is the longest target key: "p", a length, the target.
	linkKeyMax = 1 + 2 + maxKeyTarget
)

// MaxPathSize is the longest corpus path, in bytes, the incremental index
// takes: its longest row key, a link row, is a prefix, a target key and
// the source path, and must fit percolator.MaxRowSize. Sync refuses a
// longer path as a bad file.
const MaxPathSize = percolator.MaxRowSize - len(linkPrefix) - linkKeyMax

func docRow(path string) string   { return docPrefix + path }
func dirtyRow(path string) string { return dirtyPrefix + path }
func hashRow(hash string) string  { return hashPrefix + hash }

// termFlagCell is the cell of a term's counted flag: the flags of the
// terms with the same first byte share a row, so that a fold writes a few
// rows, not one per term. The column is "#" and the term (letters and
// digits, so a valid column name): the "#" keeps it apart from every
// column the pipeline observes, whose writes would otherwise notify them.
func termFlagCell(term string) (row, col string) { return termFlagPrefix + term[:1], "#" + term }

func postingRow(term, path string) string { return termPrefix + term + "/" + path }

// postingPrefix is the prefix of every posting of term.
func postingPrefix(term string) string { return termPrefix + term + "/" }

// splitPosting returns the term and path of a posting row.
func splitPosting(row string) (term, path string, ok bool) {
	return strings.Cut(strings.TrimPrefix(row, termPrefix), "/")
}

func linkRow(target, source string) string { return linkPrefix + linkKey(target) + source }

// linkKey is the unambiguous, bounded form of a link target in a key.
func linkKey(target string) string {
	if len(target) > maxKeyTarget {
		sum := sha256.Sum256([]byte(target))
		return "h" + string(sum[:])
	}
	b := binary.BigEndian.AppendUint16([]byte("p"), uint16(len(target)))
	return string(b) + target
}

// checkPath returns an error if path is too long for the index's keys.
func checkPath(path string) error {
	if len(path) > MaxPathSize {
		return fmt.Errorf("path of %d bytes exceeds the limit of %d", len(path), MaxPathSize)
	}
	return nil
}

// prefixEnd is the first row after every row beginning with p.
func prefixEnd(p string) string { return string(storage.PrefixEnd([]byte(p))) }
