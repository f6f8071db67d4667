// Package coordtest is the conformance suite of the coord interfaces: every
// implementation (in-process, etcd) passes the same checks.
package coordtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
)

// MembershipHarness makes the handles under test: New returns the handle
// of a new live owner (its Owner is what its members are listed under);
// Kill ends that owner's liveness as its death would (etcd: the session
// is closed or its lease expires).
type MembershipHarness struct {
	New  func(t *testing.T, owner string) coord.Membership
	Kill func(t *testing.T, owner string)
	// Wait bounds how long a change may take to be delivered (a dead
	// etcd lease takes its TTL); 10s if zero.
	Wait time.Duration
}

// TestMembership runs the conformance checks of coord.Membership.
func TestMembership(t *testing.T, h MembershipHarness) {
	if h.Wait == 0 {
		h.Wait = 10 * time.Second
	}
	t.Run("JoinChangeLeave", func(t *testing.T) { joinChangeLeave(t, h) })
	t.Run("StaleEndKeepsLaterRegistration", func(t *testing.T) { staleEnd(t, h) })
	t.Run("DeathLeavesAndForbidsRejoin", func(t *testing.T) { death(t, h) })
	t.Run("WatchEndsWithCtx", func(t *testing.T) { watchEnds(t, h) })
}

func list(ms []coord.Member) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.Owner + "=" + m.Value)
	}
	return b.String()
}

// await reads w until it delivers want (owner=value, sorted, space
// separated); lists must always be sorted by owner.
func await(t *testing.T, h MembershipHarness, w <-chan []coord.Member, want string) {
	t.Helper()
	deadline := time.After(h.Wait)
	last := "(nothing)"
	for {
		select {
		case ms, ok := <-w:
			if !ok {
				t.Fatalf("watch closed while waiting for [%s]; last [%s]", want, last)
			}
			if !slices.IsSortedFunc(ms, func(a, b coord.Member) int { return strings.Compare(a.Owner, b.Owner) }) {
				t.Fatalf("list not sorted by owner: [%s]", list(ms))
			}
			last = list(ms)
			if last == want {
				return
			}
		case <-deadline:
			t.Fatalf("no [%s] within %v; last delivered [%s]", want, h.Wait, last)
		}
	}
}

func register(t *testing.T, m coord.Membership, ctx context.Context, group, value string) {
	t.Helper()
	if err := m.Register(ctx, group, value); err != nil {
		t.Fatalf("Register(%s, %s): %v", group, value, err)
	}
}

func joinChangeLeave(t *testing.T, h MembershipHarness) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := h.New(t, "a"), h.New(t, "b")
	w := a.WatchMembers(ctx, "g")
	await(t, h, w, "")
	bctx, bleave := context.WithCancel(ctx)
	register(t, b, bctx, "g", "b1")
	await(t, h, w, "b=b1")
	register(t, a, ctx, "g", "a1")
	register(t, a, ctx, "gx", "other group")
	await(t, h, w, "a=a1 b=b1")
	register(t, a, ctx, "g", "a2") // replaces a1
	await(t, h, w, "a=a2 b=b1")
	bleave() // the end of a registration's ctx: b leaves, at once or when its lease lapses
	await(t, h, w, "a=a2")
	// A second watch starts from the present.
	w2 := b.WatchMembers(ctx, "g")
	await(t, h, w2, "a=a2")
}

func staleEnd(t *testing.T, h MembershipHarness) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := h.New(t, "a")
	first, endFirst := context.WithCancel(ctx)
	register(t, a, first, "g", "v1")
	register(t, a, ctx, "g", "v2")
	w := a.WatchMembers(ctx, "g")
	await(t, h, w, "a=v2")
	endFirst() // the replaced registration ends: v2 stays
	time.Sleep(200 * time.Millisecond)
	second := a.WatchMembers(ctx, "g")
	await(t, h, second, "a=v2")
	// Nor does a registration that ended return when a later one ends
	// and the owner registers again.
	third, endThird := context.WithCancel(ctx)
	register(t, a, third, "g", "v3")
	await(t, h, w, "a=v3")
	endThird()
	await(t, h, w, "")
}

func death(t *testing.T, h MembershipHarness) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	obs, d := h.New(t, "obs"), h.New(t, "dies")
	w := obs.WatchMembers(ctx, "g")
	await(t, h, w, "")
	register(t, d, ctx, "g", "d")
	register(t, obs, ctx, "g", "o")
	await(t, h, w, "dies=d obs=o")
	h.Kill(t, "dies")
	await(t, h, w, "obs=o")
	err := d.Register(ctx, "g", "again")
	if !errors.Is(err, coord.ErrNotAlive) {
		t.Fatalf("a dead owner's Register: %v, want coord.ErrNotAlive", err)
	}
	time.Sleep(200 * time.Millisecond)
	await(t, h, obs.WatchMembers(ctx, "g"), "obs=o")
}

func watchEnds(t *testing.T, h MembershipHarness) {
	a := h.New(t, "a")
	ctx, cancel := context.WithCancel(context.Background())
	w := a.WatchMembers(ctx, "g")
	await(t, h, w, "")
	cancel()
	deadline := time.After(h.Wait)
	for {
		select {
		case _, ok := <-w:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch still open %v after its ctx ended", h.Wait)
		}
	}
}
