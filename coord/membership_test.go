package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/internal/leakcheck"
)

// next reads the next list from w, failing after a few seconds.
func next(t *testing.T, w <-chan []Member) []Member {
	t.Helper()
	select {
	case l, ok := <-w:
		if !ok {
			t.Fatal("watch closed")
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no membership change delivered")
	}
	return nil
}

func owners(l []Member) []string {
	var out []string
	for _, m := range l {
		out = append(out, m.Owner+"="+m.Value)
	}
	return out
}

func expect(t *testing.T, got []Member, want ...string) {
	t.Helper()
	if !slices.Equal(owners(got), want) {
		t.Fatalf("members %v, want %v", owners(got), want)
	}
}

// TestLocalMembership: joins, re-registrations, deaths and the end of a
// registration's ctx each deliver the full sorted list; a dead owner
// cannot join again; other groups are untouched.
func TestLocalMembership(t *testing.T) {
	defer checkNoLeak(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := NewLocalMembership("b")
	a, c := b.As("a"), b.As("c")
	w := a.WatchMembers(ctx, "g")
	expect(t, next(t, w))
	if err := b.Register(ctx, "g", "vb"); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, w), "b=vb")
	if err := a.Register(ctx, "g", "va"); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, w), "a=va", "b=vb")
	if err := c.Register(ctx, "other", "vc"); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	if err := c.Register(cctx, "g", "vc"); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, w), "a=va", "b=vb", "c=vc")
	if err := a.Register(ctx, "g", "va2"); err != nil {
		t.Fatal(err)
	}
	expect(t, next(t, w), "a=va2", "b=vb", "c=vc")
	ccancel() // c's registration in g ends with its ctx
	expect(t, next(t, w), "a=va2", "b=vb")
	expect(t, c.Members("other"), "c=vc")
	b.Remove("a") // a dies
	expect(t, next(t, w), "b=vb")
	if err := a.Register(ctx, "g", "again"); !errors.Is(err, ErrNotAlive) {
		t.Fatalf("Register of a dead owner: %v, want ErrNotAlive", err)
	}
	cancel()
	select {
	case _, ok := <-w:
		if ok {
			for range w {
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch not closed after its ctx ended")
	}
}

// TestLocalMembershipStaleEnd: the end of an earlier registration's ctx
// does not remove the owner's later registration.
func TestLocalMembershipStaleEnd(t *testing.T) {
	ctx := context.Background()
	m := NewLocalMembership("a")
	first, cancel := context.WithCancel(ctx)
	if err := m.Register(first, "g", "1"); err != nil {
		t.Fatal(err)
	}
	later, cancelLater := context.WithCancel(ctx)
	defer cancelLater()
	if err := m.Register(later, "g", "2"); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The end of a ctx is handled asynchronously: give a wrong removal
	// time to happen.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
		expect(t, m.Members("g"), "a=2")
	}
	cancelLater()
	eventually(t, func() bool { return len(m.Members("g")) == 0 })
	if err := m.Register(first, "g", "3"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Register with an ended ctx: %v", err)
	}
}

// TestLocalMembershipSlowReader: a watcher that does not read while the
// group changes gets the newest list next, not a stale one.
func TestLocalMembershipSlowReader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := NewLocalMembership("a")
	w := m.WatchMembers(ctx, "g")
	expect(t, next(t, w))
	for _, o := range []string{"x", "y", "z"} {
		if err := m.As(o).Register(ctx, "g", o); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := next(t, w)
		if len(l) == 3 {
			expect(t, l, "x=x", "y=y", "z=z")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw all three members; last %v", owners(l))
		}
	}
}

// eventually waits up to a few seconds for cond.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// checkNoLeak is leakcheck.Check.
func checkNoLeak(t *testing.T) func() { return leakcheck.Check(t) }
