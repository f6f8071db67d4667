package txn

import (
	"fmt"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// TestIndexWrittenSince: the index decides "a write record at or after
// ts?" (conflicts, with no lock in the way) only above its base and its
// floor, counts rollbacks, and after
// dropping a full map declines to decide below the raised floor.
func TestIndexWrittenSince(t *testing.T) {
	ix := newCellIndex(1, 0)
	cell := func(row string) *rowWrites { return &rowWrites{row: []byte(row), muts: []*mutation{{col: "c"}}} }
	put := func(row string, ts uint64, op Op) {
		m := storage.SetCell(FamilyWrite, "c", ts, encodeWrite(&Write{Op: op, StartTS: ts - 1}))
		ix.apply([]byte(row), []storage.Mutation{m})
	}
	check := func(what string, rw *rowWrites, ts uint64, wantWritten, wantDecided bool) {
		t.Helper()
		if w, d := ix.conflicts(rw, 0, ts); w != wantWritten || d != wantDecided {
			t.Fatalf("%s: conflicts(%q, 0, %d) = %v, %v; want %v, %v", what, rw.row, ts, w, d, wantWritten, wantDecided)
		}
	}
	put("a", 5, OpPut)
	check("before any base", cell("a"), 6, false, false)
	ix.offerBase(10)
	ix.offerBase(20) // the first offer stands
	check("at base", cell("a"), 10, false, false)
	check("above base, untouched cell", cell("a"), 11, false, true)
	put("a", 12, OpPut)
	put("b", 13, OpRollback)
	check("commit after start", cell("a"), 11, true, true)
	check("commit at start", cell("a"), 12, true, true)
	check("commit before start", cell("a"), 13, false, true)
	check("rollback at start", cell("b"), 13, true, true)
	ix.apply([]byte("a"), []storage.Mutation{storage.DeleteCell(FamilyWrite, "c", 12)})
	check("a deleted record stays counted", cell("a"), 11, true, true)

	ts := uint64(100)
	for i := range maxLatestPerShard {
		put(fmt.Sprint("fill", i), ts, OpPut)
		ts++
	}
	put("last", ts, OpPut)
	floor := ix.shards[0].floor // the map filled up and was dropped once
	if floor < 100 || floor >= ts {
		t.Fatalf("floor %d after %d writes from ts 100: want it raised to a dropped write's ts", floor, maxLatestPerShard+1)
	}
	check("below the raised floor", cell("a"), floor, false, false)
	check("above the raised floor", cell("a"), floor+1, false, true)
	check("written after the drop", cell("last"), ts, true, true)
	rw := &rowWrites{row: []byte("last"), muts: []*mutation{{col: "other"}, {col: "c"}}}
	check("any cell of the row", rw, ts, true, true)

	ix.apply([]byte("last"), []storage.Mutation{{Kind: storage.DeleteRow}})
	check("after DeleteRow", cell("last"), ts, false, true)
}
