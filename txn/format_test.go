package txn

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// TestFormatCell: the scenarios' rendering, family first, of each kind of
// cell, inline values and corrupt records included.
func TestFormatCell(t *testing.T) {
	for _, c := range []struct {
		family string
		value  []byte
		want   string
	}{
		{FamilyLock, encodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("Bob"), PrimaryCol: "bal", Owner: "w"}), "lock:put primary@Bob/bal owner=w"},
		{FamilyLock, encodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("Bob"), PrimaryCol: "bal", Owner: "w", Inline: true, Value: []byte("$3")}), `lock:put primary@Bob/bal owner=w value="$3"`},
		{FamilyWrite, encodeWrite(&Write{Op: OpPut, StartTS: 3, Inline: true, Value: []byte("$3")}), `write:put data@3 value="$3"`},
		{FamilyWrite, encodeWrite(&Write{Op: OpDelete, StartTS: 5}), "write:delete data@5"},
		{FamilyWrite, encodeWrite(&Write{Op: OpRollback, StartTS: 7}), "write:rollback"},
		{FamilyWrite, encodeWrite(&Write{Op: OpLock, StartTS: 8}), "write:lock start@8"},
		{FamilyLock, encodeLock(&Lock{Op: OpLock, PrimaryRow: []byte("Bob"), PrimaryCol: "bal", Owner: "w"}), "lock:lock primary@Bob/bal owner=w"},
		{FamilyLock, encodeLock(&Lock{Op: OpRollback, PrimaryRow: []byte("Bob"), PrimaryCol: "bal", Owner: "w"}), "lock:<corrupt>"},
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
	lock := encodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("a\x00b"), PrimaryCol: "bal", Owner: "w", Inline: true, Value: []byte("xyz")})
	for _, c := range []struct {
		family, col string
		value       []byte
		want        string
	}{
		{FamilyLock, "c", lock, `put primary@"a\x00b"/BAL owner=w value=c=3B`},
		{FamilyWrite, "c", encodeWrite(&Write{Op: OpPut, StartTS: 3, Inline: true, Value: []byte("ab")}), "put data@3 value=c=2B"},
		{FamilyWrite, "c", encodeWrite(&Write{Op: OpPut, StartTS: 3}), "put data@3"},
		{FamilyData, "c", []byte("abcd"), "c=4B"},
		{FamilyLock, "c", []byte("junk"), "<corrupt>"},
	} {
		if got := f.Format(c.family, c.col, c.value); got != c.want {
			t.Errorf("Format(%s, %s, %q) = %q, want %q", c.family, c.col, c.value, got, c.want)
		}
	}
}

// TestCellVersions: a row's cells laid out per column in column order,
// newest timestamp first, data, lock and write side by side; other
// families are left out.
func TestCellVersions(t *testing.T) {
	put := encodeWrite(&Write{Op: OpPut, StartTS: 3})
	lock := encodeLock(&Lock{Op: OpPut, PrimaryRow: []byte("r"), PrimaryCol: "b", Owner: "w"})
	cells := []storage.Cell{
		{Family: FamilyData, Qualifier: "b", TS: 3, Value: []byte("old")},
		{Family: FamilyWrite, Qualifier: "b", TS: 4, Value: put},
		{Family: FamilyLock, Qualifier: "b", TS: 5, Value: lock},
		{Family: FamilyData, Qualifier: "b", TS: 5, Value: []byte("new")},
		{Family: FamilyData, Qualifier: "a", TS: 1, Value: []byte("x")},
		{Family: "notify", Qualifier: "a", TS: 9, Value: nil},
	}
	got := CellFormat{Column: strings.ToUpper}.Versions(cells)
	want := []CellVersion{
		{Column: "A", TS: 1, Data: `"x"`, col: "a"},
		{Column: "B", TS: 5, Data: `"new"`, Lock: "put primary@r/B owner=w", col: "b"},
		{Column: "B", TS: 4, Write: "put data@3", col: "b"},
		{Column: "B", TS: 3, Data: `"old"`, col: "b"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Versions:\n got %+v\nwant %+v", got, want)
	}
	if v := (CellFormat{}).Versions(nil); v == nil || len(v) != 0 {
		t.Fatalf("Versions of no cells: %#v, want an empty list", v)
	}
}
