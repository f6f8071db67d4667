package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/coord/coordtest"
	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
)

// next receives the watch's next list and fails unless it is want.
func next(t *testing.T, w <-chan []etcd.Member, want ...etcd.Member) {
	t.Helper()
	if want == nil {
		want = []etcd.Member{}
	}
	select {
	case got, ok := <-w:
		if !ok {
			t.Fatalf("watch closed, want %v", want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("watch delivered %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no list from the watch after 10s, want %v", want)
	}
}

func member(owner, value string) etcd.Member { return etcd.Member{Owner: owner, Value: value} }

func register(t *testing.T, s *etcd.Session, group, value string) {
	t.Helper()
	if err := s.Register(ctx, group, value); err != nil {
		t.Fatal(err)
	}
}

// TestMembersJoinAndLeave: a watch of a group delivers the sorted list at
// start and after each join, change and leave (by Close, and by a crash
// that lets the lease expire), and nothing for other groups, a group
// whose name extends this one's included.
func TestMembersJoinAndLeave(t *testing.T) {
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	obs := open(t, cli, "obs")
	a := open(t, cli, "a")
	b := open(t, cli, "b")
	crashing := etcdtest.Client(t, m)
	c := open(t, crashing, "c")

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obs.WatchMembers(wctx, "workers")
	next(t, w)
	register(t, b, "workers", "b:1")
	next(t, w, member("b", "b:1"))
	register(t, c, "workers", "c:1")
	next(t, w, member("b", "b:1"), member("c", "c:1"))
	register(t, a, "workers", "a:1")
	next(t, w, member("a", "a:1"), member("b", "b:1"), member("c", "c:1"))
	register(t, a, "workersx", "no")
	register(t, a, "other", "no")
	register(t, a, "workers", "a:2")
	next(t, w, member("a", "a:2"), member("b", "b:1"), member("c", "c:1"))
	got, err := obs.Members(ctx, "workers")
	if want := []etcd.Member{member("a", "a:2"), member("b", "b:1"), member("c", "c:1")}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("Members: %v, %v; want %v", got, err, want)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	next(t, w, member("a", "a:2"), member("c", "c:1"))
	crashing.Close() // c stops renewing and cannot revoke: its lease expires
	start := time.Now()
	next(t, w, member("a", "a:2"))
	t.Logf("c left %v after its client closed (lease %v)", time.Since(start), ttl)

	cancel()
	for range w {
		t.Fatal("a list delivered after the watch's context ended")
	}
}

// TestWatchEndsWithSession: closing the session closes its watches.
func TestWatchEndsWithSession(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	s := open(t, cli, "s")
	w := s.WatchMembers(ctx, "workers")
	next(t, w)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting for the watch after 5s")
	}
	select {
	case l, ok := <-w:
		if ok {
			t.Fatalf("watch delivered %v after Close", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch still open 5s after Close")
	}
}

// TestMembershipConformance: Session.Membership passes the coord.Membership
// suite; a death is the session's Close (a lapsed lease is
// TestMembersJoinAndLeave's).
func TestMembershipConformance(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	var (
		mu       sync.Mutex
		sessions = map[string]*etcd.Session{}
	)
	coordtest.TestMembership(t, coordtest.MembershipHarness{
		New: func(t *testing.T, owner string) coord.Membership {
			mu.Lock()
			defer mu.Unlock()
			// Each subtest has its own key space.
			s := openOpts(t, cli, etcd.SessionOptions{Owner: owner, TTL: ttl, Prefix: strings.ReplaceAll(t.Name(), "/", "-") + "/"})
			sessions[fmt.Sprint(t.Name(), "/", owner)] = s
			return s.Membership()
		},
		Kill: func(t *testing.T, owner string) {
			mu.Lock()
			s := sessions[fmt.Sprint(t.Name(), "/", owner)]
			mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		},
	})
}
