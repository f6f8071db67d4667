package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/server"
)

// TestServeUntil: ServeUntil serves until its context ends, then drains
// (a health watcher is told NOT_SERVING and let go) and returns nil; the
// metrics ServeMetrics serves are scraped meanwhile.
func TestServeUntil(t *testing.T) {
	srv, err := server.Open(context.Background(), server.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.ServeUntil(ctx, lis, time.Minute) }()
	statuses := watchHealth(t, lis.Addr().String())
	scrapeMetrics(t, srv)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeUntil after its context ended: %v, want nil (drained)", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ServeUntil did not return within a minute of its context's end")
	}
	if s, ok := <-statuses; !ok || s.String() != "NOT_SERVING" {
		t.Fatalf("the health watcher saw %v (stream open %v), want NOT_SERVING", s, ok)
	}
}

// scrapeMetrics serves srv's metrics on a free port and reads them once.
func scrapeMetrics(t *testing.T, srv *server.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for ServeMetrics
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	stop, err := srv.ServeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "# TYPE") {
		t.Fatalf("/metrics: %s, %d bytes (%v)", resp.Status, len(b), err)
	}
}
