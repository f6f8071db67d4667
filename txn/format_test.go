package txn

import (
	"strconv"
	"strings"
	"testing"
)

// TestFormatCell: the scenarios' rendering, family first, of each kind of
// cell, inline values and corrupt records included.
func TestFormatCell(t *testing.T) {
	for _, c := range []struct {
		family string
		value  []byte
		want   string
	}{
		{FamilyLock, EncodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("Bob"), PrimaryCol: "bal", Owner: "w"}), "lock:put primary@Bob/bal owner=w"},
		{FamilyLock, EncodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("Bob"), PrimaryCol: "bal", Owner: "w", Inline: true, Value: []byte("$3")}), `lock:put primary@Bob/bal owner=w value="$3"`},
		{FamilyWrite, EncodeWrite(&Write{Op: OpPut, StartTS: 3, Inline: true, Value: []byte("$3")}), `write:put data@3 value="$3"`},
		{FamilyWrite, EncodeWrite(&Write{Op: OpDelete, StartTS: 5}), "write:delete data@5"},
		{FamilyWrite, EncodeWrite(&Write{Op: OpRollback, StartTS: 7}), "write:rollback"},
		{FamilyData, []byte("$10"), `data:"$10"`},
		{FamilyLock, []byte{0xff}, "lock:<corrupt>"},
		{FamilyWrite, nil, "write:<corrupt>"},
	} {
		if got := FormatCell(c.family, c.value); got != c.want {
			t.Errorf("FormatCell(%s, %q) = %q, want %q", c.family, c.value, got, c.want)
		}
	}
}

// TestCellFormat: a configured format renders values by their column
// (data cells and the values records inline alike) and the primary's names
// through its own functions, and leaves the rest as FormatCell does.
func TestCellFormat(t *testing.T) {
	f := CellFormat{
		Value:  func(col string, v []byte) string { return col + "=" + strconv.Itoa(len(v)) + "B" },
		Row:    strconv.Quote,
		Column: strings.ToUpper,
	}
	lock := EncodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("a\x00b"), PrimaryCol: "bal", Owner: "w", Inline: true, Value: []byte("xyz")})
	for _, c := range []struct {
		family, col string
		value       []byte
		want        string
	}{
		{FamilyLock, "c", lock, `put primary@"a\x00b"/BAL owner=w value=c=3B`},
		{FamilyWrite, "c", EncodeWrite(&Write{Op: OpPut, StartTS: 3, Inline: true, Value: []byte("ab")}), "put data@3 value=c=2B"},
		{FamilyWrite, "c", EncodeWrite(&Write{Op: OpPut, StartTS: 3}), "put data@3"},
		{FamilyData, "c", []byte("abcd"), "c=4B"},
		{FamilyLock, "c", []byte("junk"), "<corrupt>"},
	} {
		if got := f.Format(c.family, c.col, c.value); got != c.want {
			t.Errorf("Format(%s, %s, %q) = %q, want %q", c.family, c.col, c.value, got, c.want)
		}
	}
}
