package pebble

import (
	"sync/atomic"
	"time"
)

// Group commit: pebble's log writer syncs whatever is pending as soon as
// the previous sync ends. With many writers, the first to come back from
// a sync starts the next one almost alone, and the others, still
// building their next write, wait for a whole sync more. Waiting a little
// after a sync before the next (pebble's WALMinSyncInterval) lets them
// share it, as PostgreSQL's commit_delay does; like its commit_siblings,
// the wait applies only while many writers commit at once (a lone writer
// never waits: its sync starts when it asks).
const (
	// DefaultSyncDelay is Options.SyncDelay's default.
	DefaultSyncDelay = 100 * time.Microsecond
	// syncSiblings is how many synced commits the recent syncs must have
	// carried on average (groupSync.recent) for the next to wait.
	syncSiblings = 8
)

// groupSync decides, as each log sync ends, how long the next waits.
type groupSync struct {
	delay time.Duration // 0: never
	// commits counts the synced commits applied since the last decision.
	commits atomic.Int64
	// recent is a moving average of commits over the decisions, in
	// sixteenths: one decision's count swings with the phase of the
	// writers (those that came back first from a sync start the next one
	// nearly alone). Only pebble's log writer goroutine touches it.
	recent int64
}

// committed records a synced commit applied to the log.
func (g *groupSync) committed() { g.commits.Add(1) }

// interval is pebble's WALMinSyncInterval: the delay while the last
// syncs carried syncSiblings commits or more on average, else 0.
func (g *groupSync) interval() time.Duration {
	// recent += (16n - recent) / 4: a quarter's weight to the newest.
	g.recent += 4*g.commits.Swap(0) - g.recent/4
	if g.recent >= syncSiblings*16 {
		return g.delay
	}
	return 0
}
