package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout of a cell (see doc.go):
//
//	family 0x00 | escape(row) 0x00 0x01 | escape(qualifier) 0x00 0x01 | ^ts (8 bytes, big-endian)
//
// escape replaces each 0x00 byte with 0x00 0xFF. A family holds no NUL, so
// the first 0x00 ends it and every family is one contiguous keyspace
// [family 0x00, family 0x01). The escaped terminator 0x00 0x01 sorts below
// any escaped continuation (0x00 0xFF or a non-zero byte), so rows (and
// qualifiers within a row) sort bytewise and no encoded row is a prefix of
// another. The inverted timestamp puts the newest version first.
//
// Keys beginning with 0x00 are not cells (a family is never empty): they
// hold the store's own metadata.
const (
	escape    = 0x00
	escapedFF = 0xFF
	termByte  = 0x01
	tsLen     = 8
)

// cellComparer orders keys bytewise and splits a cell's key into its
// column (family, row, qualifier) and its timestamp, so that bloom filters
// are built over columns and a column's versions are one prefix. A
// metadata key is all prefix. Bytewise order respects the split because no
// encoded column is a proper prefix of another (each part is terminated)
// and a column alone sorts before its versions.
var cellComparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Name = "percolator.cell.v1"
	c.Split = splitCell
	return &c
}()

// splitCell returns the length of key's column: all of it but the
// timestamp for a cell key, all of it for anything else. It parses from
// the front, so a column alone (which ends like a shorter column and a
// timestamp could) is never split.
func splitCell(key []byte) int {
	if len(key) == 0 || key[0] == escape {
		return len(key)
	}
	i := bytes.IndexByte(key, escape)
	if i < 0 {
		return len(key)
	}
	i++           // past the family's terminator
	for range 2 { // the escaped row, then the escaped qualifier
		for {
			j := bytes.IndexByte(key[i:], escape)
			if j < 0 || i+j+1 >= len(key) {
				return len(key)
			}
			i += j + 2
			if key[i-1] == termByte {
				break
			}
			if key[i-1] != escapedFF {
				return len(key)
			}
		}
	}
	return i
}

// Metadata keys.
var (
	formatKey        = []byte("\x00format")
	familyMetaPrefix = []byte("\x00family\x00")
)

// formatVersion is the value of formatKey this code writes and reads.
const formatVersion = "1"

var errBadKey = errors.New("pebble: malformed key")

// appendEscaped appends b escaped and terminated.
func appendEscaped(dst, b []byte) []byte {
	for {
		i := bytes.IndexByte(b, escape)
		if i < 0 {
			break
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, escapedFF)
		b = b[i+1:]
	}
	dst = append(dst, b...)
	return append(dst, escape, termByte)
}

// appendEscapedString is appendEscaped for a string.
func appendEscapedString(dst []byte, s string) []byte {
	for {
		i := indexNUL(s)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, escapedFF)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, escape, termByte)
}

func indexNUL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

// appendFamilyStart appends the first key of family's keyspace.
func appendFamilyStart(dst []byte, family string) []byte {
	dst = append(dst, family...)
	return append(dst, 0x00)
}

// appendFamilyEnd appends the exclusive end of family's keyspace.
func appendFamilyEnd(dst []byte, family string) []byte {
	dst = append(dst, family...)
	return append(dst, 0x01)
}

// appendRowPrefix appends the prefix shared by every cell of row in family.
func appendRowPrefix(dst []byte, family string, row []byte) []byte {
	return appendEscaped(appendFamilyStart(dst, family), row)
}

// appendColumnPrefix appends the prefix shared by every version of a column.
func appendColumnPrefix(dst []byte, family string, row []byte, qualifier string) []byte {
	return appendEscapedString(appendRowPrefix(dst, family, row), qualifier)
}

// appendTS appends the inverted big-endian timestamp.
func appendTS(dst []byte, ts uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// keyLen returns the exact length of a cell key, so that callers can
// allocate it once.
func keyLen(family string, row []byte, qualifier string) int {
	return len(family) + 1 + len(row) + bytes.Count(row, []byte{escape}) + 2 +
		len(qualifier) + strings.Count(qualifier, "\x00") + 2 + tsLen
}

// appendKey appends the key of one cell.
func appendKey(dst []byte, family string, row []byte, qualifier string, ts uint64) []byte {
	return appendTS(appendColumnPrefix(dst, family, row, qualifier), ts)
}

// decodeTS returns the timestamp of a cell key.
func decodeTS(key []byte) uint64 {
	return ^binary.BigEndian.Uint64(key[len(key)-tsLen:])
}

// escapedLen returns the length of the escaped, terminated string at the
// start of b, terminator included.
func escapedLen(b []byte) (int, error) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != escape {
			continue
		}
		switch b[i+1] {
		case termByte:
			return i + 2, nil
		case escapedFF:
			i++
		default:
			return 0, fmt.Errorf("%w: byte %#x after 0x00", errBadKey, b[i+1])
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errBadKey)
}

// unescape decodes an escaped, terminated string (terminator included).
func unescape(dst, b []byte) []byte {
	b = b[:len(b)-2]
	for {
		i := bytes.IndexByte(b, escape)
		if i < 0 {
			return append(dst, b...)
		}
		dst = append(dst, b[:i+1]...)
		b = b[i+2:]
	}
}

// cellKey is a decoded cell key.
type cellKey struct {
	family    string
	row       []byte
	qualifier string
	ts        uint64
}

// decodeKey decodes a full cell key.
func decodeKey(key []byte) (cellKey, error) {
	f := bytes.IndexByte(key, 0x00)
	if f <= 0 {
		return cellKey{}, fmt.Errorf("%w: no family", errBadKey)
	}
	rest := key[f+1:]
	rn, err := escapedLen(rest)
	if err != nil {
		return cellKey{}, err
	}
	qn, err := escapedLen(rest[rn:])
	if err != nil {
		return cellKey{}, err
	}
	if len(rest) != rn+qn+tsLen {
		return cellKey{}, fmt.Errorf("%w: %d trailing bytes, want %d", errBadKey, len(rest)-rn-qn, tsLen)
	}
	return cellKey{
		family:    string(key[:f]),
		row:       unescape(nil, rest[:rn]),
		qualifier: string(unescape(nil, rest[rn:rn+qn])),
		ts:        decodeTS(key),
	}, nil
}
