package docindex

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by the error a read of the incremental index
// returns for a stored value it cannot decode.
var ErrCorrupt = errors.New("docindex: corrupt stored value")

// Stored values are binary, never text: titles, paths, words and links are
// user bytes, and a text encoding such as JSON rewrites invalid UTF-8
// (into U+FFFD), so the incremental index would differ from the batch
// build. A string is a uvarint length and its bytes; a sorted list is a
// uvarint count and its strings front-coded (a uvarint length shared with
// the previous string, then the rest as a string), so the sorted links of
// a document, which mostly share its directory, cost about what their
// hrefs do.

// docVersion is the first byte of an encoded Doc.
const docVersion = 1

// appendString appends s, length-prefixed.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendUvarints appends each of vs as a uvarint.
func appendUvarints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// appendSorted appends the sorted list ss, front-coded.
func appendSorted(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	prev := ""
	for _, s := range ss {
		n := sharedPrefix(prev, s)
		b = binary.AppendUvarint(b, uint64(n))
		b = appendString(b, s[n:])
		prev = s
	}
	return b
}

func sharedPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// decoder reads what the append functions wrote; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad length")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string past the end")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// sorted reads a front-coded list; it returns nil for an empty one.
func (d *decoder) sorted() []string {
	n := d.uvarint()
	if n > uint64(len(d.b)) { // every entry takes at least two bytes
		d.fail("list longer than its value")
		return nil
	}
	var ss []string
	prev := ""
	for range n {
		shared := d.uvarint()
		if shared > uint64(len(prev)) {
			d.fail("bad shared prefix")
		}
		if d.err != nil {
			return nil
		}
		s := prev[:shared] + d.string()
		ss = append(ss, s)
		prev = s
	}
	return ss
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
}

// end reports the sticky error, or one for trailing bytes.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("trailing bytes")
	}
	return d.err
}

// encodeDoc is the stored form of a parsed Doc.
func encodeDoc(doc Doc) []byte {
	b := []byte{docVersion}
	b = appendString(b, doc.Title)
	b = appendString(b, doc.Hash)
	b = appendSorted(b, doc.Words)
	return appendSorted(b, doc.Links)
}

func decodeDoc(v []byte) (Doc, error) {
	if len(v) == 0 || v[0] != docVersion {
		return Doc{}, fmt.Errorf("%w: not a version %d doc", ErrCorrupt, docVersion)
	}
	d := decoder{b: v[1:]}
	doc := Doc{Title: d.string(), Hash: d.string(), Words: d.sorted(), Links: d.sorted()}
	return doc, d.end()
}

// encodeList is the stored form of a sorted list of strings.
func encodeList(ss []string) []byte { return appendSorted(nil, ss) }

func decodeList(v []byte) ([]string, error) {
	d := decoder{b: v}
	ss := d.sorted()
	return ss, d.end()
}

// contribution is what terms last wrote for a document: its words and
// links, each sorted.
type contribution struct {
	Words, Links []string
}

func encodeContribution(c contribution) []byte {
	return appendSorted(appendSorted(nil, c.Words), c.Links)
}

func decodeContribution(v []byte) (contribution, error) {
	d := decoder{b: v}
	c := contribution{Words: d.sorted(), Links: d.sorted()}
	return c, d.end()
}
