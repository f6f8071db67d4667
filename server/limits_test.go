package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// wantLimit checks a refusal by a server limit: ResourceExhausted naming
// the option and the serve flag that raise it, which the client maps to
// rpc.ErrLimit (not to an oversized message).
func wantLimit(t *testing.T, what string, conn *rpc.Conn, err error, option, flag string) {
	t.Helper()
	wantCode(t, what, err, codes.ResourceExhausted, "server.Options."+option+";")
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "serve "+flag+" raises") {
		t.Errorf("%s: %q does not name the flag %s", what, msg, flag)
	}
	if cerr := conn.Error(err); !errors.Is(cerr, rpc.ErrLimit) || strings.Contains(cerr.Error(), "size limit") {
		t.Errorf("%s: the client reads the refusal as %v, want rpc.ErrLimit", what, cerr)
	}
}

// TestSessionLimits: sessions are capped per owner and in all; a refused
// open opens nothing, the sessions held keep working, and closing one
// makes room.
func TestSessionLimits(t *testing.T) {
	srv := servertest.Start(t, server.Options{MaxSessions: 4, MaxSessionsPerOwner: 2}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	c := conn.Coord
	open := func(owner string) (string, error) {
		resp, err := c.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: owner, TtlMs: 60_000})
		return resp.GetSession(), err
	}
	mustOpen := func(owner string) string {
		t.Helper()
		id, err := open(owner)
		if err != nil {
			t.Fatalf("open a session of %s: %v", owner, err)
		}
		return id
	}
	a1, a2 := mustOpen("a"), mustOpen("a")
	_, err := open("a")
	wantLimit(t, "a third session of one owner", conn, err, "MaxSessionsPerOwner", "--max-sessions-per-owner")
	mustOpen("b")
	mustOpen("b")
	_, err = open("c")
	wantLimit(t, "a fifth session", conn, err, "MaxSessions", "--max-sessions")
	if n := metric(t, srv, "percolator_sessions"); n != 4 {
		t.Fatalf("%v sessions after the refusals, want 4", n)
	}
	for _, id := range []string{a1, a2} {
		if _, err := c.KeepAlive(ctx, &rpcpb.KeepAliveRequest{Session: id}); err != nil {
			t.Fatalf("a session held beside the refusals: %v", err)
		}
	}
	if _, err := c.CloseSession(ctx, &rpcpb.CloseSessionRequest{Session: a1}); err != nil {
		t.Fatal(err)
	}
	mustOpen("c")
	if _, err := c.CloseSession(ctx, &rpcpb.CloseSessionRequest{Session: a2}); err != nil {
		t.Fatal(err)
	}
	mustOpen("a")
}

// TestLockLimits: advisory locks are capped per session and in all; a
// refused lock is not taken, a session may try a lock it holds again, and
// unlocking (or ending the session) makes room.
func TestLockLimits(t *testing.T) {
	srv := servertest.Start(t, server.Options{MaxLocks: 5, MaxLocksPerSession: 3}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	c := conn.Coord
	session := func(owner string) string {
		resp, err := c.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: owner, TtlMs: 60_000})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Session
	}
	lock := func(s, key string) (bool, error) {
		resp, err := c.TryLock(ctx, &rpcpb.TryLockRequest{Session: s, Key: key})
		return resp.GetHeld(), err
	}
	mustLock := func(s, key string) {
		t.Helper()
		if held, err := lock(s, key); err != nil || held {
			t.Fatalf("lock %s: held %v, %v", key, held, err)
		}
	}
	s1, s2, s3 := session("a"), session("b"), session("c")
	for _, k := range []string{"k1", "k2", "k3"} {
		mustLock(s1, k)
	}
	_, err := lock(s1, "k4")
	wantLimit(t, "a fourth lock of one session", conn, err, "MaxLocksPerSession", "--max-locks-per-session")
	mustLock(s1, "k1") // held already: no new lock
	mustLock(s2, "k4")
	mustLock(s2, "k5")
	_, err = lock(s2, "k6")
	wantLimit(t, "a sixth lock", conn, err, "MaxLocks", "--max-locks")
	if n := metric(t, srv, "percolator_advisory_locks"); n != 5 {
		t.Fatalf("%v locks after the refusals, want 5", n)
	}
	if held, err := lock(s3, "k1"); err != nil || !held {
		t.Fatalf("a lock held beside the refusals: held %v, %v", held, err)
	}
	if _, err := c.Unlock(ctx, &rpcpb.UnlockRequest{Session: s1, Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	mustLock(s2, "k6")
	if _, err := c.CloseSession(ctx, &rpcpb.CloseSessionRequest{Session: s2}); err != nil {
		t.Fatal(err)
	}
	mustLock(s1, "k7")
	mustLock(s3, "k4")
	mustLock(s3, "k5")
	if n := metric(t, srv, "percolator_advisory_locks"); n != 5 {
		t.Fatalf("%v locks, want 5", n)
	}
}

// TestNonceLimits: nonce groups are capped in all, and the calls one group
// holds (at or above its client's low-water mark) per group and in all.
// A refused open or call applies nothing; the groups and calls held keep
// working (a duplicate of a held call is replayed); a raised mark frees
// its group's room.
func TestNonceLimits(t *testing.T) {
	srv := servertest.Start(t, server.Options{MaxNonceGroups: 3, MaxNonceCalls: 3, MaxNonceCallsPerGroup: 2}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	s := conn.Storage
	group := func(i byte) []byte { return bytes.Repeat([]byte{i}, server.GroupLen) }
	openGroup := func(i byte) error {
		_, err := s.OpenNonceGroup(ctx, &rpcpb.OpenNonceGroupRequest{Group: group(i)})
		return err
	}
	for i := byte(1); i <= 3; i++ {
		if err := openGroup(i); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, srv)
	before, last := snapshot(t, srv), allocate(t, conn)
	wantLimit(t, "a fourth nonce group", conn, openGroup(4), "MaxNonceGroups", "--max-nonce-groups")
	if err := openGroup(1); err != nil {
		t.Fatalf("opening a known group again: %v", err)
	}
	settle(t, srv)
	unchanged(t, srv, conn, before, last)

	incr := func(g byte, seq, low uint64) (int64, error) {
		resp, err := s.Increment(ctx, &rpcpb.IncrementRequest{
			Row: []byte(fmt.Sprint("ctr", g)), Family: []byte("c"), Qualifier: []byte("n"), Delta: 1,
			Nonce: &rpcpb.Nonce{Group: group(g), Seq: seq, LowWater: low},
		})
		return resp.GetValue(), err
	}
	mustIncr := func(g byte, seq, low uint64, want int64) {
		t.Helper()
		if v, err := incr(g, seq, low); err != nil || v != want {
			t.Fatalf("group %d call %d: %d, %v; want %d", g, seq, v, err, want)
		}
	}
	mustIncr(1, 1, 1, 1)
	mustIncr(1, 2, 1, 2)
	settle(t, srv)
	before, last = snapshot(t, srv), allocate(t, conn)
	_, err := incr(1, 3, 1)
	wantLimit(t, "a third call held by one group", conn, err, "MaxNonceCallsPerGroup", "--max-nonce-calls-per-group")
	mustIncr(1, 1, 1, 1) // replayed
	settle(t, srv)
	unchanged(t, srv, conn, before, last)

	mustIncr(2, 1, 1, 1)
	settle(t, srv)
	before, last = snapshot(t, srv), allocate(t, conn)
	_, err = incr(2, 2, 1)
	wantLimit(t, "a fourth call held", conn, err, "MaxNonceCalls", "--max-nonce-calls")
	settle(t, srv)
	unchanged(t, srv, conn, before, last)

	mustIncr(1, 3, 3, 3) // the mark drops calls 1 and 2: room in both limits
	mustIncr(2, 2, 1, 2)
}
