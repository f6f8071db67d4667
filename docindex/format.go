package docindex

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// FormatValue describes a value the incremental index stores in column
// col, decoded (for `percolator dump`): ok is false if col is not one of
// the index's binary columns or v does not decode as one. Strings are
// Go-quoted, so any bytes print.
func FormatValue(col string, v []byte) (string, bool) {
	switch col {
	case colParsed:
		d, err := decodeDoc(v)
		return fmt.Sprintf("doc title=%q hash=%s words=%s links=%s", d.Title, d.Hash, formatList(d.Words), formatList(d.Links)), err == nil
	case colMembers:
		l, err := decodeList(v)
		return formatList(l), err == nil
	case colIndexed:
		c, err := decodeContribution(v)
		return fmt.Sprintf("words=%s links=%s", formatList(c.Words), formatList(c.Links)), err == nil
	case colDirtyWords:
		c, err := decodeContribution(v)
		return fmt.Sprintf("set=%s deleted=%s", formatList(c.Words), formatList(c.Links)), err == nil
	case colLoaded:
		r, err := decodeLoaded(v)
		return fmt.Sprintf("hash=%s size=%d mtime=%d inode=%d", r.hash, r.stat.Size, r.stat.ModTime, r.stat.Inode), err == nil
	case colDocuments, colTerms, colClusters, colFolds:
		if len(v) != 8 {
			return "", false
		}
		return fmt.Sprint(binary.BigEndian.Uint64(v)), true
	}
	return "", false
}

// formatList is a list's length and its items, quoted, the first few.
func formatList(l []string) string {
	const shown = 8
	q := make([]string, 0, min(len(l), shown))
	for _, s := range l[:min(len(l), shown)] {
		q = append(q, fmt.Sprintf("%q", s))
	}
	more := ""
	if len(l) > shown {
		more = fmt.Sprintf(" ...%d more", len(l)-shown)
	}
	return fmt.Sprintf("%d[%s%s]", len(l), strings.Join(q, " "), more)
}
