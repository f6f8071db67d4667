package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// TestPrewriteAsync: an async prewrite writes the rows whose predicate
// selects nothing, their stamped values ending in the timestamp its
// stamper handed out, and nothing in the others; reads of its rows (and
// every scan) begun while it is between its timestamp and its write
// return only once the write is there, reads of other rows do not wait;
// a call where every predicate selects a cell takes no timestamp; a
// guard's error applies nothing; without a stamper it is refused; bad
// input changes nothing.
func TestPrewriteAsync(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lock := func(v string) []storage.Mutation {
		return []storage.Mutation{storage.SetCell("l", "c", 5, append([]byte(v), make([]byte, storage.StampSize)...))}
	}
	locked := storage.Filter{{Family: "l", AllQualifiers: true}}
	checks := []storage.AsyncCheck{
		{Row: []byte("a"), Predicate: locked, Mutations: []storage.Mutation{storage.SetCell("d", "c", 5, []byte("data"))}, Stamped: lock("a")},
		{Row: []byte("b"), Predicate: locked, Stamped: lock("b")},
	}
	if _, _, err := s.PrewriteAsync(ctx, checks, nil); !errors.Is(err, storage.ErrNoOnePhase) {
		t.Fatalf("without a stamper: %v; want ErrNoOnePhase", err)
	}
	g := &gateStamper{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	g.next.Store(10)
	s.SetStamper(g)
	v := uint64(1)
	if _, _, err := s.PrewriteAsync(ctx, checks, &v); !errors.Is(err, storage.ErrNoOnePhase) {
		t.Fatalf("with a registry version to check: %v; want ErrNoOnePhase", err)
	}
	for name, bad := range map[string][]storage.AsyncCheck{
		"no check":      nil,
		"a row twice":   {checks[0], checks[0]},
		"a short stamp": {{Row: []byte("a"), Stamped: []storage.Mutation{storage.SetCell("l", "c", 5, []byte("short"))}}},
		"a delete":      {{Row: []byte("a"), Stamped: []storage.Mutation{{Kind: storage.DeleteRow}}}},
		"an empty row":  {{Predicate: locked, Stamped: lock("x")}},
	} {
		if _, _, err := s.PrewriteAsync(ctx, bad, nil); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Fatalf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
	if r, err := s.ReadRow(ctx, []byte("a"), storage.Filter{{Family: "l", AllQualifiers: true}, {Family: "d", AllQualifiers: true}}); err != nil || len(r.Cells) != 0 {
		t.Fatalf("after bad input: %v, %v; want nothing", r, err)
	}
	// b holds a lock: its predicate selects it, and only a is written.
	if err := s.Mutate(ctx, []byte("b"), storage.SetCell("l", "c", 3, []byte("other"))); err != nil {
		t.Fatal(err)
	}

	type result struct {
		ts       uint64
		conflict []bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		ts, conflict, err := s.PrewriteAsync(ctx, checks, nil)
		done <- result{ts, conflict, err}
	}()
	<-g.entered // the call holds its latches and marks, no timestamp yet
	read := make(chan storage.Row, 1)
	go func() {
		r, err := s.ReadRow(ctx, []byte("a"), locked)
		if err != nil {
			t.Error(err)
		}
		read <- r
	}()
	scanned := make(chan int, 1)
	go func() {
		n := 0
		err := s.Scan(ctx, nil, nil, locked, 0, func(r storage.Row) bool { n += len(r.Cells); return true })
		if err != nil {
			t.Error(err)
		}
		scanned <- n
	}()
	if r, err := s.ReadRow(ctx, []byte("another row"), locked); err != nil || len(r.Cells) != 0 {
		t.Fatalf("a read of another row: %v, %v", r, err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if err := s.AwaitOnePhase(short, []byte("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait on a row of the call while it is in flight: %v; want it to wait until its context ends", err)
	}
	cancel()
	g.gate <- struct{}{}
	res := <-done
	if res.err != nil || res.ts != 11 || len(res.conflict) != 2 || res.conflict[0] || !res.conflict[1] {
		t.Fatalf("the call: %+v; want a applied at 11, b in conflict", res)
	}
	r := <-read
	if len(r.Cells) != 1 || string(r.Cells[0].Value[:1]) != "a" || binary.BigEndian.Uint64(r.Cells[0].Value[1:]) != 11 {
		t.Fatalf("the read waiting for the call got %+v; want a's lock stamped 11", r)
	}
	if n := <-scanned; n != 2 {
		t.Fatalf("the scan waiting for the call found %d locks; want a's and b's other", n)
	}
	if r, err := s.ReadRow(ctx, []byte("b"), locked); err != nil || len(r.Cells) != 1 || r.Cells[0].TS != 3 {
		t.Fatalf("b after its conflict: %v, %v; want only the other lock", r, err)
	}

	// Every predicate selects a cell: no timestamp taken.
	if ts, conflict, err := s.PrewriteAsync(ctx, checks, nil); err != nil || ts != 0 || !conflict[0] || !conflict[1] {
		t.Fatalf("a copy: %d, %v, %v; want both in conflict, no timestamp", ts, conflict, err)
	}
	// A guard's error applies nothing.
	go func() { <-g.entered; g.gate <- struct{}{} }()
	boom := errors.New("registry moved")
	fresh := []storage.AsyncCheck{{Row: []byte("g"), Predicate: locked, Stamped: lock("g")}}
	if _, _, err := s.PrewriteAsyncGuarded(ctx, fresh, nil, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a guarded call: %v; want the guard's error", err)
	}
	if r, err := s.ReadRow(ctx, []byte("g"), locked); err != nil || len(r.Cells) != 0 {
		t.Fatalf("after a guard's refusal: %v, %v; want nothing", r, err)
	}
	// A cond that decides: it is asked, the predicate not read.
	go func() { <-g.entered; g.gate <- struct{}{} }()
	conds := []storage.Cond{func() (bool, bool) { return false, true }}
	if _, conflict, err := s.PrewriteAsyncGuarded(ctx, []storage.AsyncCheck{{Row: []byte("b"), Predicate: locked, Stamped: lock("b")}}, conds, nil); err != nil || conflict[0] {
		t.Fatalf("a call whose cond says no conflict: %v, %v; want it applied", conflict, err)
	}
}
