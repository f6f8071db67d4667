package percolator

import (
	"context"
	"time"

	"github.com/seed-992972ee/percolator/coord"

	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// GCResult is what a garbage collection pass removed (or, dry, would
// remove).
type GCResult struct {
	// SafePoint is the timestamp the pass collected below: no snapshot
	// below it is readable any more.
	SafePoint uint64
	// Versions are the write records and data versions removed, Bytes
	// their values' bytes.
	Versions, Bytes int
	// Rows is the rows the pass visited; Skipped those it left for a live
	// transaction's lock (collected by a later pass).
	Rows, Skipped int
	Duration      time.Duration
	DryRun        bool
	// Resumed: the pass finished one that a crash or a cancellation had
	// cut short, from the row it had reached, below the safe point it had
	// (GC then does that instead of a new pass: run it again for one).
	Resumed bool
}

// GCOptions shape DB.GCWith.
type GCOptions struct {
	// DryRun counts what the pass would remove, changing nothing (not
	// even the safe point).
	DryRun bool
	// Progress, if set, is told after each batch of rows of the rows
	// visited and the versions and bytes found so far.
	Progress func(rows, versions, bytes int)
}

// GC runs one full garbage collection pass and returns what it removed.
// Its safe point is a timestamp sampled at least GCLifetime ago (on this
// process's clock), held back to the oldest transaction still open: in a
// process that has run for a lifetime (its background collector samples)
// it starts at once; otherwise it samples and waits one GCLifetime first.
func (db *DB) GC(ctx context.Context) (GCResult, error) { return db.GCWith(ctx, GCOptions{}) }

// GCWith is GC with options: a dry run, progress.
func (db *DB) GCWith(ctx context.Context, o GCOptions) (GCResult, error) {
	if rs, ok := db.store.(*remote.Store); ok {
		// The server collects its store (its clients may not write the
		// reserved rows the collector keeps its state in).
		p, err := rs.CollectGarbage(ctx, o.DryRun)
		return GCResult{SafePoint: p.SafePoint, Versions: p.Versions, Bytes: p.Bytes, Rows: p.Rows, Skipped: p.Skipped,
			Duration: p.Duration, DryRun: o.DryRun, Resumed: p.Resumed}, apiErr(err)
	}
	co := db.collectorOptions()
	if o.Progress != nil {
		co.Progress = func(rows int, got txn.Collected) { o.Progress(rows, got.Versions, got.Bytes) }
	}
	p, err := db.client.CollectOnce(ctx, co, o.DryRun)
	return GCResult{SafePoint: p.SafePoint, Versions: p.Versions, Bytes: p.Bytes, Rows: p.Rows, Skipped: p.Skipped,
		Duration: p.Duration, DryRun: p.DryRun, Resumed: p.Resumed}, apiErr(err)
}

// collectorOptions are the collector's options for this DB: its lifetime,
// and the oldest start_ts its deployment says is needed.
func (db *DB) collectorOptions() txn.CollectorOptions {
	return txn.CollectorOptions{Lifetime: db.opts.GCLifetime, Oldest: db.oldest, Delay: db.opts.gcDelay}
}

// oldest is the oldest start_ts any process on the store needs: this
// DB's own, and what the live sessions publish where the liveness session
// carries it (coord.Snapshots: a server's sessions, etcd's).
func (db *DB) oldest(ctx context.Context) (uint64, bool, error) {
	o, err := db.oldestOwner(ctx)
	return o.TS, o.TS != 0, err
}

// oldestOwner is oldest with the owner holding it ("" for this DB).
func (db *DB) oldestOwner(ctx context.Context) (coord.Oldest, error) {
	var own coord.Oldest
	if ts, ok := db.client.OldestActive(); ok {
		own.TS = ts
	}
	if db.snaps == nil {
		return own, nil
	}
	other, err := db.snaps.OldestNeeded(ctx)
	if err != nil {
		return coord.Oldest{}, err
	}
	if other.TS != 0 && (own.TS == 0 || other.TS < own.TS) {
		return other, nil
	}
	return own, nil
}

// GCStats are the garbage collector's figures in this process.
type GCStats struct {
	// Passes run, versions and bytes removed, rows skipped for a live
	// lock, since Open.
	Passes, Versions, Bytes, Skipped uint64
	// SafePoint is the highest safe point this process knows; SampledAt
	// when it was sampled, if this process chose it (zero otherwise).
	SafePoint uint64
	SampledAt time.Time
}

// GCStats returns the garbage collector's figures in this process.
func (db *DB) GCStats() GCStats {
	s := db.client.GCStats()
	return GCStats{Passes: s.Passes, Versions: s.Versions, Bytes: s.Bytes, Skipped: s.Skipped, SafePoint: s.SafePoint, SampledAt: s.SampledAt}
}

// GCStatus is the garbage collector's state as a DB sees it.
type GCStatus struct {
	// SafePoint is the store's safe point: no snapshot below it is
	// readable (ErrSnapshotTooOld); 0 before the first collection.
	// SafePointSampled is when it was sampled (zero if unknown): the
	// time since is how far back snapshots stay readable, at least.
	SafePoint        uint64
	SafePointSampled time.Time
	// OldestOpen is the oldest start_ts an open transaction of this DB,
	// or of any process whose session publishes it (a server's clients,
	// etcd's), holds the safe point back to; 0 for none. OldestOwner is
	// the owner of that process's session ("" for this DB's own).
	OldestOpen  uint64
	OldestOwner string
	// Stats are this process's collector's figures.
	Stats GCStats
}

// GCStatus returns the garbage collector's state.
func (db *DB) GCStatus(ctx context.Context) (GCStatus, error) {
	info, err := txn.ReadSafePointOf(ctx, db.store)
	if err != nil {
		return GCStatus{}, apiErr(err)
	}
	oldest, err := db.oldestOwner(ctx)
	if err != nil {
		return GCStatus{}, apiErr(err)
	}
	return GCStatus{SafePoint: info.TS, SafePointSampled: info.Sampled, OldestOpen: oldest.TS, OldestOwner: oldest.Owner,
		Stats: db.GCStats()}, nil
}

// startCollector runs the background collector until Close, where this
// DB owns its store and it is not disabled.
func (db *DB) startCollector() {
	if db.opts.DisableGC || !db.client.Indexed() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = db.client.RunCollector(ctx, db.collectorOptions())
	}()
	db.closer = append(db.closer, func() error { cancel(); <-done; return nil })
}

// GCRole is how a process takes part in collecting a store that many
// processes share (Bigtable: cluster.DB.RunGC, which the workers run).
type GCRole struct {
	// MayPropose, if set, says whether this process may propose safe
	// points now (one proposer among many: the holder of an advisory
	// lock); while it says no, the collector only samples, so that it can
	// take over at once, and collects its Share below the stored safe
	// point. Two proposers at once are safe, only wasteful.
	MayPropose func(ctx context.Context) bool
	// Share, if set, is this process's index among the processes that
	// collect together and their number (0 <= i < n): each pass visits
	// only the rows of its share, and resumes from the share's own cursor.
	// Shares that disagree for a while (a process joined or left) cost
	// rows visited twice or left to the next pass, never safety.
	Share func() (i, n int)
}

// RunGC runs the garbage collector in the background until ctx ends: what
// a DB that owns its store does by itself (Options.DisableGC), for a
// deployment where no process owns the store. With the zero GCRole this
// process proposes and collects every row.
func (db *DB) RunGC(ctx context.Context, role GCRole) error {
	o := db.collectorOptions()
	o.MayCollect, o.Share = role.MayPropose, role.Share
	return apiErr(db.client.RunCollector(ctx, o))
}
