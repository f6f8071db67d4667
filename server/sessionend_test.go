package server_test

import (
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
)

// TestSessionEndedDuringGrace: during the restart grace an owner without
// a session is reported alive (its session may have been lost with an
// earlier server's memory), but not an owner whose session ended on this
// server: expired or closed here, it was not lost. A freshly started
// server otherwise hides a killed client's expired session for the whole
// grace, and its locks wait for their TTL.
func TestSessionEndedDuringGrace(t *testing.T) {
	srv := servertest.Start(t, server.Options{RestartGrace: time.Hour}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	alive := func(owner string) bool {
		t.Helper()
		r, err := conn.Coord.Alive(ctx, &rpcpb.AliveRequest{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return r.Alive
	}
	if !alive("never-seen") {
		t.Fatal("an owner this server never saw is dead during the grace")
	}
	expiring, err := conn.Coord.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "expiring", TtlMs: server.MinSessionTTL.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	closing, err := conn.Coord.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "closing", TtlMs: time.Minute.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	if !alive("closing") {
		t.Fatal("an owner with a live session is dead")
	}
	if _, err := conn.Coord.CloseSession(ctx, &rpcpb.CloseSessionRequest{Session: closing.Session}); err != nil {
		t.Fatal(err)
	}
	if alive("closing") {
		t.Fatal("an owner whose session was closed on this server is alive during the grace")
	}
	// The 100ms session expires unrenewed; the bound only detects a hang
	// (the grace is an hour).
	for deadline := time.Now().Add(30 * time.Second); alive("expiring"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("an owner whose %dms session expired on this server is still alive after 30s", expiring.TtlMs)
		}
	}
	// Renewed under the same owner, it is alive again.
	if _, err := conn.Coord.OpenSession(ctx, &rpcpb.OpenSessionRequest{Owner: "expiring", TtlMs: time.Minute.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	if !alive("expiring") || !alive("never-seen") {
		t.Fatal("a new session, or the grace, no longer counts")
	}
}
