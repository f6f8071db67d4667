package coord

import (
	"context"
	"log/slog"
	"time"
)

// Renewal is the renewal loop of a liveness session with a lease: the
// one coord/remote's sessions (a percolator server) and coord/etcd's (an
// etcd lease) run. What one renewal sends, how long it may take and what
// a lease the service no longer has becomes (a new one, for the same
// owner) are the session's: Renew. The loop decides only when to call it.
//
// A renewal goes every Every (a third of the lease: two may fail before
// the lease runs out), and every Retry while they fail (a tenth of it: an
// outage shorter than the lease's remainder costs nothing). A send on Now
// renews at once. One warning is logged per outage, at its first failure,
// and one notice when a renewal gets through again.
//
// Its fields must not change while Run runs.
type Renewal struct {
	// Renew sends one renewal on ctx (the loop's: it ends with Run), and
	// bounds it with a deadline of its own. Required.
	Renew func(ctx context.Context) error
	// Every returns the period between renewals, read before each
	// renewal (a service may grant another TTL than the one asked).
	// Required.
	Every func() time.Duration
	// Retry is the period after a failed renewal. Required.
	Retry time.Duration
	// Now, if set, asks for a renewal at once (a call found the lease
	// gone): a send on it ends the current wait.
	Now <-chan struct{}
	// Logger receives the warnings, each message prefixed with Service
	// and naming Owner. Default slog.Default().
	Logger  *slog.Logger
	Service string // "etcd", "coord": the messages' prefix
	Owner   string
}

// Run renews until ctx ends. A renewal that fails because ctx ended is
// not reported: the session is closing.
func (r *Renewal) Run(ctx context.Context) {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTimer(r.Every())
	defer t.Stop()
	failing := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.Now:
		}
		next := r.Every()
		if err := r.Renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if failing == 0 {
				log.Warn(r.Service+": session renewal failing; retrying", "owner", r.Owner, "err", err)
			}
			failing++
			next = r.Retry
		} else if failing > 0 {
			log.Info(r.Service+": session renewed again", "owner", r.Owner, "failed_attempts", failing)
			failing = 0
		}
		t.Reset(next)
	}
}
