package coord

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// records is a slog handler that keeps its records.
type records struct {
	mu  sync.Mutex
	got []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, r)
	return nil
}

func (h *records) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.got {
		out = append(out, r.Level.String()+" "+r.Message)
	}
	return out
}

// TestRenewalOutage: a renewal asked for on Now that fails is retried
// every Retry until one gets through, then waits Every again; the outage
// costs one warning and one notice, whatever its length. The periods are
// far apart (an hour against a millisecond), so no timing decides the
// outcome.
func TestRenewalOutage(t *testing.T) {
	log := &records{}
	now := make(chan struct{}, 1)
	calls := make(chan int, 8)
	n := 0
	r := &Renewal{
		Renew: func(context.Context) error {
			n++
			calls <- n
			if n <= 3 {
				return errors.New("unreachable (test)")
			}
			return nil
		},
		Every: func() time.Duration { return time.Hour },
		Retry: time.Millisecond, Now: now,
		Logger: slog.New(log), Service: "test", Owner: "o",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	now <- struct{}{}
	for want := 1; want <= 4; want++ {
		if got := <-calls; got != want {
			t.Fatalf("renewal %d, want %d", got, want)
		}
	}
	cancel()
	<-done
	if n != 4 {
		t.Fatalf("%d renewals after the one that got through, within an hour's period", n-4)
	}
	want := []string{"WARN test: session renewal failing; retrying", "INFO test: session renewed again"}
	if got := log.messages(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("logged %q, want %q", got, want)
	}
}

// TestRenewalEndsWithContext: Run returns when its context ends, a
// renewal in flight included, and reports no failure for it.
func TestRenewalEndsWithContext(t *testing.T) {
	log := &records{}
	now := make(chan struct{}, 1)
	started := make(chan struct{})
	r := &Renewal{
		Renew: func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		},
		Every: func() time.Duration { return time.Hour },
		Retry: time.Hour, Now: now, Logger: slog.New(log), Service: "test",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	now <- struct{}{}
	<-started
	cancel()
	<-done
	if got := log.messages(); len(got) != 0 {
		t.Fatalf("logged %q for a renewal cut short by the end of Run", got)
	}
}
