package storagetest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seed-992972ee/percolator/storage"
)

var (
	longRow      = bytes.Repeat([]byte("r"), storage.MaxRowKeySize+1)
	longFamily   = strings.Repeat("f", storage.MaxFamilySize+1)
	longQualifer = strings.Repeat("q", storage.MaxQualifierSize+1)
	good         = set("a", "q", 1, "good")
)

var badFilters = map[string]storage.Filter{
	"empty family":            {{Family: "", AllQualifiers: true}},
	"family with NUL":         {{Family: "a\x00b", AllQualifiers: true}},
	"family too long":         {{Family: longFamily, AllQualifiers: true}},
	"qualifier too long":      {{Family: "a", Qualifier: longQualifer}},
	"Qualifier+AllQualifiers": {{Family: "a", Qualifier: "q", AllQualifiers: true}},
	"negative limit":          {{Family: "a", AllQualifiers: true, Limit: -1}},
	"end before start":        {{Family: "a", AllQualifiers: true, Time: storage.TimeRange{Start: 5, End: 4}}},
	"bad second selector":     {fam("a"), {Family: ""}},
}

var badMutations = map[string][]storage.Mutation{
	"kind 0":                {{Family: "a", Qualifier: "q"}},
	"kind 99":               {{Kind: 99, Family: "a", Qualifier: "q"}},
	"empty family":          {set("", "q", 1, "v")},
	"family with NUL":       {set("a\x00", "q", 1, "v")},
	"family too long":       {set(longFamily, "q", 1, "v")},
	"qualifier too long":    {set("a", longQualifer, 1, "v")},
	"ts above MaxTimestamp": {set("a", "q", storage.MaxTimestamp+1, "v")},
	"delete range end<start": {{Kind: storage.DeleteCells, Family: "a", Qualifier: "q",
		Time: storage.TimeRange{Start: 3, End: 2}}},
	"delete empty family": {{Kind: storage.DeleteCells, Qualifier: "q"}},
	"good then bad":       {good, {Kind: storage.DeleteRow}, set("", "q", 1, "v")},
}

var badRows = map[string][]byte{"empty row": {}, "nil row": nil, "row of 4097 bytes": longRow}

// badCall is one call that must fail with ErrInvalidArgument.
type badCall struct {
	name string
	call func(storage.Store) error
}

func badCalls() []badCall {
	var cs []badCall
	add := func(name string, call func(storage.Store) error) { cs = append(cs, badCall{name, call}) }
	for name, row := range badRows {
		add("ReadRow: "+name, func(s storage.Store) error { _, err := s.ReadRow(ctx, row, storage.Filter{fam("a")}); return err })
		add("Mutate: "+name, func(s storage.Store) error { return s.Mutate(ctx, row, good) })
		add("CheckAndMutate: "+name, func(s storage.Store) error {
			_, err := s.CheckAndMutate(ctx, row, nil, nil, []storage.Mutation{good})
			return err
		})
		add("Increment: "+name, func(s storage.Store) error { _, err := s.Increment(ctx, row, "a", "n", 1); return err })
		add("MutateRows: "+name, func(s storage.Store) error {
			return mutateRows(s, storage.RowMutation{Row: []byte("ok"), Mutations: []storage.Mutation{good}}, storage.RowMutation{Row: row, Mutations: []storage.Mutation{good}})
		})
	}
	for name, f := range badFilters {
		add("ReadRow: "+name, func(s storage.Store) error { _, err := s.ReadRow(ctx, []byte("r"), f); return err })
		add("Scan: "+name, func(s storage.Store) error { return s.Scan(ctx, nil, nil, f, 0, failOnRow) })
		add("CheckAndMutate predicate: "+name, func(s storage.Store) error {
			_, err := s.CheckAndMutate(ctx, []byte("r"), f, []storage.Mutation{good}, []storage.Mutation{good})
			return err
		})
	}
	for name, ms := range badMutations {
		add("Mutate: "+name, func(s storage.Store) error { return s.Mutate(ctx, []byte("r"), ms...) })
		// The bad branch is checked even when the other one runs.
		add("CheckAndMutate ifTrue: "+name, func(s storage.Store) error {
			_, err := s.CheckAndMutate(ctx, []byte("r"), nil, ms, []storage.Mutation{good})
			return err
		})
		add("CheckAndMutate ifFalse: "+name, func(s storage.Store) error {
			_, err := s.CheckAndMutate(ctx, []byte("r"), storage.Filter{fam("a")}, []storage.Mutation{good}, ms)
			return err
		})
		add("MutateRows: "+name, func(s storage.Store) error {
			return mutateRows(s, storage.RowMutation{Row: []byte("ok"), Mutations: []storage.Mutation{good}}, storage.RowMutation{Row: []byte("r"), Mutations: ms})
		})
	}
	add("Mutate: ts above the store's MaxTimestamp", func(s storage.Store) error {
		return s.Mutate(ctx, []byte("r"), set("a", "q", storage.MaxTimestampOf(s)+1, "v"))
	})
	add("CheckAndMutate: ts above the store's MaxTimestamp", func(s storage.Store) error {
		_, err := s.CheckAndMutate(ctx, []byte("r"), nil, nil, []storage.Mutation{set("a", "q", storage.MaxTimestampOf(s)+1, "v")})
		return err
	})
	add("Scan: start after end", func(s storage.Store) error {
		return s.Scan(ctx, []byte("b"), []byte("a"), storage.Filter{fam("a")}, 0, failOnRow)
	})
	add("Scan: negative limit", func(s storage.Store) error { return s.Scan(ctx, nil, nil, storage.Filter{fam("a")}, -1, failOnRow) })
	add("Increment: empty family", func(s storage.Store) error { _, err := s.Increment(ctx, []byte("r"), "", "n", 1); return err })
	add("Increment: family with NUL", func(s storage.Store) error { _, err := s.Increment(ctx, []byte("r"), "a\x00", "n", 1); return err })
	add("Increment: qualifier too long", func(s storage.Store) error { _, err := s.Increment(ctx, []byte("r"), "a", longQualifer, 1); return err })
	add("Increment: value not 8 bytes", func(s storage.Store) error { _, err := s.Increment(ctx, []byte("r"), "a", "short", 1); return err })
	return cs
}

func failOnRow(storage.Row) bool { panic("storagetest: Scan called fn despite bad input") }

// mutateRows calls MutateRows, or fakes an invalid-argument error for a
// store that is not a Batcher (so the case passes trivially there).
func mutateRows(s storage.Store, rows ...storage.RowMutation) error {
	b, ok := s.(storage.Batcher)
	if !ok {
		return storage.ErrInvalidArgument
	}
	_, err := b.MutateRows(ctx, rows)
	return err
}

func testBadInput(t *testing.T, s storage.Store) {
	put(t, s, "r", set("a", "q", 1, "before"), set("a", "short", 3, "abc"), set("lock", "c", 1, "L"))
	put(t, s, "ok", set("b", "q", 1, "before"))
	var hook *hookRecorder
	if _, ok := s.(storage.ApplyHooker); ok {
		hook = recordHook(t, s)
	}
	before := dump(t, s)
	for _, c := range badCalls() {
		expectErr(t, c.name, c.call(s), storage.ErrInvalidArgument)
		expectRows(t, c.name+" changed the store", dump(t, s), before)
		if hook != nil {
			hook.expect(t, c.name+" called the hook")
		}
	}
	long := bytes.Repeat([]byte{0xff}, storage.MaxRowKeySize)
	long[1] = 0xfe // not a reserved row (storage.ReservedPrefix): a server refuses those
	if err := s.Mutate(ctx, long, good); err != nil {
		t.Fatalf("a row of exactly MaxRowKeySize bytes was refused: %v", err)
	}
}
