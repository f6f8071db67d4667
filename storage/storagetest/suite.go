package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

// Open returns a new, empty store for one subtest. The suite closes it.
type Open func(t *testing.T) storage.Store

// Run runs the conformance suite against the stores open returns, one
// fresh store per subtest. Optional capabilities (Batcher, ApplyHooker) are
// tested when the store has them.
func Run(t *testing.T, open Open) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer func() {
				if err := s.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
					t.Errorf("Close: %v", err)
				}
			}()
			tc.fn(t, s)
		})
	}
}

var cases = []struct {
	name string
	fn   func(*testing.T, storage.Store)
}{
	{"PutRead", testPutRead},
	{"Ordering", testOrdering},
	{"Overwrite", testOverwrite},
	{"TimeRange", testTimeRange},
	{"Limit", testLimit},
	{"UnionFilter", testUnionFilter},
	{"DeleteCells", testDeleteCells},
	{"DeleteRow", testDeleteRow},
	{"MutationOrder", testMutationOrder},
	{"TrickyRowKeys", testTrickyRowKeys},
	{"Scan", testScan},
	{"ScanSkipsUnselectedRows", testScanSkipsUnselected},
	{"ScanFamilyIsolation", testScanFamilyIsolation},
	{"ScanManyRows", testScanManyRows},
	{"ScanCallbackReentry", testScanCallbackReentry},
	{"CheckAndMutate", testCheckAndMutate},
	{"CheckAndMutateExactTS", testCheckAndMutateExactTS},
	{"CheckAndMutateUnion", testCheckAndMutateUnion},
	{"Increment", testIncrement},
	{"MutateRows", testMutateRows},
	{"Deferred", testDeferred},
	{"Conditioned", testConditioned},
	{"Unless", testUnless},
	{"Counted", testCounted},
	{"ApplyHook", testApplyHook},
	{"ApplyHookConcurrent", testApplyHookConcurrent},
	{"ApplyHookOwner", testApplyHookOwner},
	{"BadInput", testBadInput},
	{"Copies", testCopies},
	{"Closed", testClosed},
	{"ConcurrentCAS", testConcurrentCAS},
	{"ConcurrentRows", testConcurrentRows},
	{"CloseRacing", testCloseRacing},
	{"Randomized", testRandomized},
	{"Clock", testClock},
}

var ctx = context.Background()

func put(t testing.TB, s storage.Store, row string, ms ...storage.Mutation) {
	t.Helper()
	if err := s.Mutate(ctx, []byte(row), ms...); err != nil {
		t.Fatalf("Mutate(%q): %v", row, err)
	}
}

func read(t testing.TB, s storage.Store, row string, f storage.Filter) []storage.Cell {
	t.Helper()
	r, err := s.ReadRow(ctx, []byte(row), f)
	if err != nil {
		t.Fatalf("ReadRow(%q): %v", row, err)
	}
	if !bytes.Equal(r.Key, []byte(row)) {
		t.Fatalf("ReadRow(%q) returned key %q", row, r.Key)
	}
	return r.Cells
}

func scan(t testing.TB, s storage.Store, start, end string, f storage.Filter, limit int) []storage.Row {
	t.Helper()
	var rows []storage.Row
	err := s.Scan(ctx, bytesOrNil(start), bytesOrNil(end), f, limit, func(r storage.Row) bool {
		rows = append(rows, r)
		return true
	})
	if err != nil {
		t.Fatalf("Scan(%q, %q): %v", start, end, err)
	}
	return rows
}

func bytesOrNil(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// expectCells fails unless got equals want.
func expectCells(t testing.TB, what string, got, want []storage.Cell) {
	t.Helper()
	if !cellsEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, fmtCells(got), fmtCells(want))
	}
}

func expectRows(t testing.TB, what string, got, want []storage.Row) {
	t.Helper()
	if !rowsEqual(got, want) {
		t.Fatalf("%s:\n got  %s\n want %s", what, fmtRows(got), fmtRows(want))
	}
}

func fmtCells(cs []storage.Cell) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s:%q@%d=%q", c.Family, c.Qualifier, c.TS, c.Value)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtRows(rs []storage.Row) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%q%s", r.Key, fmtCells(r.Cells))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func cell(family, qualifier string, ts uint64, value string) storage.Cell {
	return storage.Cell{Family: family, Qualifier: qualifier, TS: ts, Value: []byte(value)}
}

func set(family, qualifier string, ts uint64, value string) storage.Mutation {
	return storage.SetCell(family, qualifier, ts, []byte(value))
}

func col(family, qualifier string, tr storage.TimeRange) storage.Selector {
	return storage.Selector{Family: family, Qualifier: qualifier, Time: tr}
}

func fam(family string) storage.Selector {
	return storage.Selector{Family: family, AllQualifiers: true}
}

// suiteFamilies are every family the suite writes.
var suiteFamilies = []string{"a", "ab", "b", "data", "lock", "notify", "n"}

// everything selects every cell the suite may have written.
func everything() storage.Filter {
	f := make(storage.Filter, len(suiteFamilies))
	for i, name := range suiteFamilies {
		f[i] = fam(name)
	}
	return f
}

// dump returns every row of the store, for "nothing changed" checks.
func dump(t testing.TB, s storage.Store) []storage.Row {
	t.Helper()
	return scan(t, s, "", "", everything(), 0)
}

func expectErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}
