package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage/memory"
)

var ctx = context.Background()

func newLocker(t *testing.T, st *memory.Store, holder string) *Locker {
	t.Helper()
	lk, err := New(st, Options{Holder: holder, MaxBackOff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// TestMutualExclusion: 32 contenders on one lock, some dying while they
// hold it (they stop acting and never release), some working past their
// lease (they must stop when it ends) and some renewing it: every holder
// acts only while its lease is valid by its own clock, no two holders'
// actions overlap in time, tokens strictly increase with the grants and
// waiters are served in ticket order.
func TestMutualExclusion(t *testing.T) {
	st := memory.New()
	defer st.Close()
	contend(t, st, contention{n: 32, grants: 50, ttl: 60 * time.Millisecond, renew: 0.1, overrun: 0.1, death: 0.15})
}

// TestFairness: waiters that queued while the lock was held are served in
// the order of their tickets.
func TestFairness(t *testing.T) {
	st := memory.New()
	defer st.Close()
	main := newLocker(t, st, "main")
	held, err := main.Acquire(ctx, "f", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lk := newLocker(t, st, fmt.Sprint("w", i))
			l, err := lk.Acquire(ctx, "f", time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			_ = lk.Release(ctx, l)
		}()
		for { // wait for waiter i's ticket before the next queues
			s, err := main.read(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			if len(s.tickets) == i+1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if err := main.Release(ctx, held); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("served in order %v, want ticket order", order)
	}
}

// TestExpiryAndTokens: a dead holder's lease expires and the next
// acquirer gets a larger token; the old lease can no longer be renewed or
// released; a release does not reset the token counter.
func TestExpiryAndTokens(t *testing.T) {
	st := memory.New()
	defer st.Close()
	a, b := newLocker(t, st, "a"), newLocker(t, st, "b")
	la, err := a.Acquire(ctx, "x", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "x", time.Minute) // waits for a's lease to expire
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token <= la.Token {
		t.Fatalf("token %d after %d", lb.Token, la.Token)
	}
	if la.Valid() {
		t.Fatal("a's lease still valid by a's clock after b got the lock")
	}
	if err := a.Renew(ctx, la); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("renewing a taken-over lease: %v", err)
	}
	if err := a.Release(ctx, la); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("releasing a taken-over lease: %v", err)
	}
	if err := b.Renew(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, lb); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second release: %v", err)
	}
	lc, err := a.Acquire(ctx, "x", time.Minute)
	if err != nil || lc.Token <= lb.Token {
		t.Fatalf("after a release: token %v (err %v), want above %d", lc, err, lb.Token)
	}
}

// TestCancelWithdrawsTicket: a waiter whose context ends leaves no ticket.
func TestCancelWithdrawsTicket(t *testing.T) {
	st := memory.New()
	defer st.Close()
	a, b := newLocker(t, st, "a"), newLocker(t, st, "b")
	if _, err := a.Acquire(ctx, "c", time.Minute); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(cctx, "c", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	s, err := a.read(ctx, "c")
	if err != nil || len(s.tickets) != 0 {
		t.Fatalf("tickets left: %v, %v", s.tickets, err)
	}
}

// TestBadInput: empty names, zero or negative TTLs, a nil lease: clear
// errors, nothing written.
func TestBadInput(t *testing.T) {
	st := memory.New()
	defer st.Close()
	lk := newLocker(t, st, "a")
	for _, c := range []struct {
		name string
		err  error
	}{
		{"empty name", func() error { _, err := lk.Acquire(ctx, "", time.Second); return err }()},
		{"zero TTL", func() error { _, err := lk.Acquire(ctx, "n", 0); return err }()},
		{"negative TTL", func() error { _, err := lk.Acquire(ctx, "n", -time.Second); return err }()},
		{"release nil", lk.Release(ctx, nil)},
		{"renew a forged lease", lk.Renew(ctx, &Lease{Name: "n"})},
	} {
		if !errors.Is(c.err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, c.err)
		}
	}
	if _, err := New(noClock{st}, Options{}); !errors.Is(err, ErrNoClock) {
		t.Fatalf("a store without a clock: %v", err)
	}
	s, err := lk.read(ctx, "n")
	if err != nil || s.token != 0 || len(s.tickets) != 0 {
		t.Fatalf("bad input wrote: %+v %v", s, err)
	}
}

type noClock struct{ *memory.Store }

func (noClock) Now() {}
