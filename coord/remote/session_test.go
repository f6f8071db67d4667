package remote_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/coord/remote"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// Liveness over the RPC: sessions of a real server, with leases short
// enough that expiry happens within a test.

const ttl = 300 * time.Millisecond

var ctx = context.Background()

var quiet = slog.New(slog.DiscardHandler)

// opts: unknown owners are reported alive for ttl after a start.
var opts = server.Options{RestartGrace: ttl, FlushInterval: 10 * time.Millisecond, Logger: quiet}

func open(t *testing.T, conn *rpc.Conn, owner string, ttl time.Duration) *remote.Session {
	t.Helper()
	s, err := remote.Open(ctx, conn, owner, ttl, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// alive asks the server whether owner is alive (Session.Alive answers its
// own owner without asking).
func alive(t *testing.T, conn *rpc.Conn, owner string) bool {
	t.Helper()
	resp, err := conn.Coord.Alive(ctx, &rpcpb.AliveRequest{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Alive
}

func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// pastGrace waits until the server no longer reports unknown owners alive.
func pastGrace(t *testing.T, conn *rpc.Conn) {
	t.Helper()
	waitFor(t, "the restart grace is over", func() bool { return !alive(t, conn, "nobody") })
}

// TestAliveWhileRenewedDeadAfterClose: an owner is alive while its session
// is renewed, for several leases, and dead as soon as it is closed.
func TestAliveWhileRenewedDeadAfterClose(t *testing.T) {
	srv := servertest.Start(t, opts, "")
	obs := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	s := open(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), "worker", ttl)
	pastGrace(t, obs)
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		if !alive(t, obs, "worker") {
			t.Fatal("a renewed session's owner is reported dead")
		}
		if err := s.Check(); err != nil {
			t.Fatalf("Check of a renewed session: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(t, obs, "worker") {
		t.Fatal("the owner of a closed session is reported alive")
	}
	if err := s.Check(); !errors.Is(err, remote.ErrSessionLost) {
		t.Fatalf("Check after Close: %v, want ErrSessionLost", err)
	}
}

// TestDeadAfterTTLWithoutRenewal: a process that stops renewing (its
// connection gone) is alive until its lease runs out, then dead; the
// locks its session held are then free.
func TestDeadAfterTTLWithoutRenewal(t *testing.T) {
	srv := servertest.Start(t, opts, "")
	obs := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	other := open(t, obs, "other", ttl)
	conn, err := rpc.Dial(ctx, srv.Addr, rpc.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, conn, "worker", ttl)
	unlock, held, err := s.TryLock(ctx, "k", "worker")
	if err != nil || held {
		t.Fatalf("TryLock: %v, %v", held, err)
	}
	defer unlock()
	if _, held, err := other.TryLock(ctx, "k", "other"); err != nil || !held {
		t.Fatalf("TryLock of a held lock: held=%v, %v", held, err)
	}
	pastGrace(t, obs)
	conn.Close() // the process stops renewing
	if !alive(t, obs, "worker") {
		t.Fatal("dead at once, before its lease ran out")
	}
	waitFor(t, "the owner that stopped renewing is dead", func() bool { return !alive(t, obs, "worker") })
	unlockOther, held, err := other.TryLock(ctx, "k", "other")
	if err != nil || held {
		t.Fatalf("TryLock after the holder's session expired: held=%v, %v", held, err)
	}
	unlockOther()
}

// TestLocksReleasedOnClose: closing a session frees its locks at once.
func TestLocksReleasedOnClose(t *testing.T) {
	srv := servertest.Start(t, opts, "")
	a := open(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), "a", ttl)
	b := open(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), "b", ttl)
	if _, held, err := a.TryLock(ctx, "k", "a"); err != nil || held {
		t.Fatalf("a TryLock: %v, %v", held, err)
	}
	if _, held, err := b.TryLock(ctx, "k", "b"); err != nil || !held {
		t.Fatalf("b TryLock of a's lock: held=%v, %v", held, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, held, err := b.TryLock(ctx, "k", "b"); err != nil || held {
		t.Fatalf("b TryLock after a closed: held=%v, %v", held, err)
	}
}

// TestCheckLapsesAndRecovers: a process cut off from the server cannot
// prove its session live once its lease runs out by its own clock, and
// can again once a renewal gets through (a new session if the server let
// the old one expire).
func TestCheckLapsesAndRecovers(t *testing.T) {
	srv := servertest.Start(t, opts, "")
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	obs := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	s := open(t, servertest.Dial(t, p.Addr(), rpc.DialOptions{}), "worker", ttl)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	p.SetRefuse(true)
	p.Cut()
	lapse := time.Now()
	waitFor(t, "Check fails", func() bool { return errors.Is(s.Check(), remote.ErrSessionLost) })
	if el := time.Since(lapse); el > 2*ttl {
		t.Errorf("Check passed %v after the last renewal could have been sent, with a %v lease", el, ttl)
	}
	waitFor(t, "the server finds the owner dead", func() bool { return !alive(t, obs, "worker") })
	p.SetRefuse(false)
	waitFor(t, "Check passes again", func() bool { return s.Check() == nil })
	if !alive(t, obs, "worker") {
		t.Fatal("Check passes but the server reports the owner dead")
	}
}

// TestRestart: after a server restart the session is opened again
// automatically (Check recovers and the owner is alive); during the
// restart grace, owners the new server has never seen are reported alive,
// and after it, dead.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	o := opts
	o.Dir = dir
	srv := servertest.Start(t, o, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	s := open(t, conn, "worker", ttl)
	srv.Kill()
	srv = servertest.Start(t, o, srv.Addr)
	obs := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	if !alive(t, obs, "ghost") {
		t.Fatal("during the restart grace an owner without a session is reported dead")
	}
	waitFor(t, "the session is opened again", func() bool { return s.Check() == nil && alive(t, obs, "worker") })
	pastGrace(t, obs)
	if alive(t, obs, "ghost") {
		t.Fatal("an owner without a session is alive after the grace")
	}
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		if !alive(t, obs, "worker") || s.Check() != nil {
			t.Fatalf("after the restart: alive=%v, Check=%v", alive(t, obs, "worker"), s.Check())
		}
	}
}

// TestRestartWithLongLease: after a restart (a power cut), the server
// never reports an owner dead while the process can still prove itself
// alive (Check passes) by a lease granted before the restart, even a lease
// longer than the server's RestartGrace: the grace then lasts that lease.
func TestRestartWithLongLease(t *testing.T) {
	const grace = 300 * time.Millisecond
	fs := vfs.NewCrashableMem()
	o := opts
	o.FS, o.Dir, o.RestartGrace = fs, "/db", grace
	srv := servertest.Start(t, o, "")
	s := open(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), "worker", time.Minute)
	o.FS = fs.CrashClone(vfs.CrashCloneCfg{})
	srv.Kill()
	srv = servertest.Start(t, o, srv.Addr)
	obs := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	for end := time.Now().Add(4 * grace); time.Now().Before(end); time.Sleep(grace / 20) {
		if s.Check() == nil && !alive(t, obs, "worker") {
			t.Fatal("Check passes while the server reports the owner dead")
		}
	}
}
