package bigtable

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// TestOpenUnreachable: the client library retries an unreachable
// Bigtable until its context ends, so Open, Init and RemoveGCRule must
// give up after OpenBudget on a context without a deadline: at an address
// that refuses connections, and at one that accepts them and never
// answers (a hung process).
func TestOpenUnreachable(t *testing.T) {
	refused := closedAddr(t)
	silent := silentAddr(t)
	for _, addr := range []string{refused, silent} {
		opts := Options{Project: "p", Instance: "i", Table: "t", Emulator: addr, OpenBudget: 200 * time.Millisecond}
		_, err := Open(context.Background(), opts)
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Open at %s: %v, want storage.ErrUnavailable", addr, err)
		}
		if err := Init(context.Background(), opts); !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Init at %s: %v, want storage.ErrUnavailable", addr, err)
		}
		if _, err := RemoveGCRule(context.Background(), opts); !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("RemoveGCRule at %s: %v, want storage.ErrUnavailable", addr, err)
		}
	}
	// The caller's own cancellation stays the caller's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Init(ctx, Options{Project: "p", Instance: "i", Table: "t", Emulator: silent})
	if err == nil || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Init with a cancelled context: %v", err)
	}
}

// closedAddr is an address on 127.0.0.1 nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// silentAddr is an address on 127.0.0.1 that accepts connections and
// never writes to them, until the test ends.
func silentAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}
