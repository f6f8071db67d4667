package etcd_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
)

// waitLong waits until cond holds; the bound only detects a hang.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSessionRidesOutEtcdRestart: etcd as a process of its own, killed
// with SIGKILL and restarted, behind a proxy that then cuts the session's
// connection. An advisory lock released while etcd was down is released
// once it is back (it used to stay held, its lease renewed, for the life
// of the process, so no scanner got the row again); the session proves
// itself live again, and takes locks again.
func TestSessionRidesOutEtcdRestart(t *testing.T) {
	m := etcdtest.StartProcess(t, etcdtest.ProcessOptions{})
	p, err := faultproxy.New(m.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	s := open(t, etcdtest.ClientAt(t, "http://"+p.Addr()), "worker")
	other := open(t, m.Client(t), "other")
	unlock := lock(t, s, "row")
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	unlock() // fails: etcd is down
	if _, _, err := s.TryLock(ctx, "row2", s.Owner()); err == nil {
		t.Fatal("TryLock with etcd down succeeded")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	waitLong(t, "able to take the row released while etcd was down", func() bool {
		u, held, err := other.TryLock(ctx, "row", other.Owner())
		if err == nil && !held {
			u()
			return true
		}
		return false
	})
	waitLong(t, "live again", func() bool { return s.Check() == nil })
	lock(t, s, "row3")()
}

// TestSessionLeaseRevoked: the session's lease revoked from outside (an
// operator, or etcd expiring it while the process was paused): the owner
// is seen dead, Check fails, and the session comes back under a new lease
// for the same owner, its memberships put again.
func TestSessionLeaseRevoked(t *testing.T) {
	m := etcdtest.StartProcess(t, etcdtest.ProcessOptions{})
	cli := m.Client(t)
	s := open(t, cli, "worker")
	obs := open(t, cli, "observer")
	if err := s.Register(ctx, "workers", "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdtest.RevokeLeaseOf(ctx, cli, etcd.DefaultPrefix+"live/worker"); err != nil {
		t.Fatal(err)
	}
	if alive(t, obs, "worker") {
		t.Fatal("alive right after its lease was revoked")
	}
	waitLong(t, "live again under a new lease", func() bool { return s.Check() == nil && alive(t, obs, "worker") })
	resp, err := cli.Get(ctx, etcd.DefaultPrefix+"members/workers/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "w1" {
		t.Fatalf("the membership after the new lease: %v %v", resp, err)
	}
	lock(t, s, "row")()
}

// TestLockReplyLost: a TryLock that etcd applies but whose reply comes too
// late (the call's deadline passed: a lost reply) fails, and leaves its
// key under the session's lease, which the session renews. The next
// attempt on the key in this process finds that key its own and takes
// the lock (it used to find it held, by no one, for the life of the
// process: a drain waiting on the row never ended). Another session sees
// it held until then, and a lock this process does hold is never taken
// over.
func TestLockReplyLost(t *testing.T) {
	m := etcdtest.StartProcess(t, etcdtest.ProcessOptions{})
	p, err := faultproxy.New(m.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	s := open(t, etcdtest.ClientAt(t, "http://"+p.Addr()), "worker")
	other := open(t, m.Client(t), "other")

	held := lock(t, s, "held") // held in this process all along
	if err := p.SetDelay(faultproxy.ToClient, faultproxy.Fixed(ttl)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.TryLock(ctx, "row", "scanner-0"); err == nil {
		t.Fatal("TryLock whose reply came after its deadline succeeded")
	}
	if err := p.SetDelay(faultproxy.ToClient, faultproxy.Delay{}); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, other, "row") // the attempt was applied
	waitLong(t, "the lock whose reply was lost taken again by its process", func() bool {
		u, held, err := s.TryLock(ctx, "row", "scanner-1")
		if err == nil && !held {
			u()
			return true
		}
		return false
	})
	lock(t, other, "row")()
	wantHeld(t, s, "held")
	held()
}
