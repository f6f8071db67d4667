// Package servertest runs an in-process percolator server on a loopback
// port for tests, and dials it.
package servertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// Server is a running in-process server.
type Server struct {
	*server.Server
	Addr string
	done chan error
}

// Start opens a server (in a temporary directory unless opts.Dir is set)
// and serves it on 127.0.0.1:0 until the test ends. To restart on the same
// address, pass it as addr ("" picks a free port). Like `percolator
// serve`, its oracle replies carry the observer registry version
// (observer.StoredVersion) unless opts.RegistryVersion says otherwise.
func Start(t testing.TB, opts server.Options, addr string) *Server {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.RegistryVersion == nil {
		opts.RegistryVersion = observer.StoredVersion
	}
	srv, err := server.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("server.Open: %v", err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	for i := 0; ; i++ { // a restarted server's port may linger briefly
		if lis, err = net.Listen("tcp", addr); err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		srv.Kill()
		t.Fatalf("listen: %v", err)
	}
	s := &Server{Server: srv, Addr: lis.Addr().String(), done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(lis) }()
	t.Cleanup(func() { s.Stop() })
	return s
}

// Stop shuts the server down gracefully (idempotent) and returns Serve's
// result.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
	return s.wait()
}

// Kill stops the server at once (see server.Server.Kill).
func (s *Server) Kill() {
	s.Server.Kill()
	_ = s.wait()
}

func (s *Server) wait() error {
	if s.done == nil {
		return nil
	}
	err := <-s.done
	s.done = nil
	return err
}

// Dial connects to addr, closing the connection when the test ends.
func Dial(t testing.TB, addr string, opts rpc.DialOptions) *rpc.Conn {
	t.Helper()
	c, err := rpc.Dial(context.Background(), addr, opts)
	if err != nil {
		t.Fatalf("rpc.Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Store returns a remote store on conn.
func Store(t testing.TB, conn *rpc.Conn, opts remote.Options) *remote.Store {
	t.Helper()
	s, err := remote.New(context.Background(), conn, opts)
	if err != nil {
		t.Fatalf("remote.New: %v", err)
	}
	return s
}
