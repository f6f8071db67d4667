package pebble

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// gateStamper hands out increasing timestamps, each only once gate lets
// it (a commit held between its timestamp and its write).
type gateStamper struct {
	next    atomic.Uint64
	gate    chan struct{}
	entered chan struct{}
}

func (g *gateStamper) Allocate(ctx context.Context, n int) (uint64, error) {
	g.entered <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.next.Add(uint64(n)), nil
}

// TestOnePhaseCommit: a one-phase commit applies its mutations and its
// stamped ones at the timestamp its stamper handed out, or, where the
// predicate selects a cell, nothing; a read or a scan begun while a
// commit of its row is between its timestamp and its write returns only
// once the write is there, and returns it; a guard's error applies
// nothing; without a stamper, or with a registry version to check, it is
// refused; bad input changes nothing.
func TestOnePhaseCommit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	row := []byte("r")
	put := []storage.Mutation{storage.SetCell("d", "c", 1, []byte("data"))}
	stamped := []storage.Mutation{storage.SetCell("w", "c", 0, []byte("rec"))}
	conflicts := storage.Filter{{Family: "w", AllQualifiers: true, Time: storage.From(1)}}

	if _, _, err := s.CommitOnePhase(ctx, row, conflicts, put, stamped, nil); !errors.Is(err, storage.ErrNoOnePhase) {
		t.Fatalf("without a stamper: %v; want ErrNoOnePhase", err)
	}
	g := &gateStamper{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	g.next.Store(10)
	s.SetStamper(g)
	v := uint64(1)
	if _, _, err := s.CommitOnePhase(ctx, row, conflicts, put, stamped, &v); !errors.Is(err, storage.ErrNoOnePhase) {
		t.Fatalf("with a registry version to check: %v; want ErrNoOnePhase", err)
	}
	for _, bad := range [][]storage.Mutation{nil, {{Kind: storage.DeleteRow}}} {
		if _, _, err := s.CommitOnePhase(ctx, row, conflicts, put, bad, nil); !errors.Is(err, storage.ErrInvalidArgument) {
			t.Fatalf("stamping %v: %v; want ErrInvalidArgument", bad, err)
		}
	}

	type result struct {
		ts       uint64
		conflict bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		ts, conflict, err := s.CommitOnePhase(ctx, row, conflicts, put, stamped, nil)
		done <- result{ts, conflict, err}
	}()
	<-g.entered // the commit holds its latch and its mark, no timestamp yet
	read := make(chan storage.Row, 1)
	go func() {
		r, err := s.ReadRow(ctx, row, storage.Filter{{Family: "w", AllQualifiers: true}})
		if err != nil {
			t.Error(err)
		}
		read <- r
	}()
	scanned := make(chan int, 1)
	go func() {
		n := 0
		err := s.Scan(ctx, nil, nil, storage.Filter{{Family: "w", AllQualifiers: true}}, 0, func(r storage.Row) bool { n += len(r.Cells); return true })
		if err != nil {
			t.Error(err)
		}
		scanned <- n
	}()
	if r, err := s.ReadRow(ctx, []byte("another row"), storage.Filter{{Family: "w", AllQualifiers: true}}); err != nil || len(r.Cells) != 0 {
		t.Fatalf("a read of another row: %v, %v", r, err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	if _, err := s.ReadRow(short, row, storage.Filter{{Family: "w", AllQualifiers: true}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a read of the row while its commit is in flight: %v; want it to wait until its context ends", err)
	}
	cancel()
	select {
	case r := <-read:
		t.Fatalf("a read returned %v while the commit was in flight", r)
	case <-time.After(10 * time.Millisecond):
	}
	g.gate <- struct{}{}
	res := <-done
	if res.err != nil || res.conflict || res.ts != 11 {
		t.Fatalf("the commit: %+v; want applied at 11", res)
	}
	if r := <-read; len(r.Cells) != 1 || r.Cells[0].TS != 11 {
		t.Fatalf("the read waiting for the commit got %+v; want the record at 11", r)
	}
	if n := <-scanned; n != 1 {
		t.Fatalf("the scan waiting for the commit found %d records; want 1", n)
	}

	// A copy finds the record: a conflict, no timestamp taken.
	go func() { <-g.entered }()
	if ts, conflict, err := s.CommitOnePhase(ctx, row, conflicts, put, stamped, nil); err != nil || !conflict || ts != 0 {
		t.Fatalf("a copy of the commit: %d, %v, %v; want a conflict", ts, conflict, err)
	}
	// A guard's error applies nothing.
	go func() { g.gate <- struct{}{} }()
	boom := errors.New("registry moved")
	if _, _, err := s.CommitOnePhaseGuarded(ctx, []byte("g"), nil, conflicts, put, stamped, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a guarded commit: %v; want the guard's error", err)
	}
	if r, err := s.ReadRow(ctx, []byte("g"), storage.Filter{{Family: "d", AllQualifiers: true}, {Family: "w", AllQualifiers: true}}); err != nil || len(r.Cells) != 0 {
		t.Fatalf("after a guard's refusal: %v, %v; want nothing", r, err)
	}
	// A guard reads through UnderLatch: a row of the commit's own stripe
	// (its own row here) is read without waiting for the latch the commit
	// holds. (A plain ReadRow there waits for the commit: for ever.)
	go func() { <-g.entered; g.gate <- struct{}{} }()
	short, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	guard := func() error {
		_, err := s.UnderLatch().ReadRow(short, []byte("h"), storage.Filter{{Family: "w", AllQualifiers: true}})
		return err
	}
	if _, conflict, err := s.CommitOnePhaseGuarded(short, []byte("h"), nil, conflicts, put, stamped, guard); err != nil || conflict {
		t.Fatalf("a commit whose guard reads its own row: %v, %v", conflict, err)
	}
}
