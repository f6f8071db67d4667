package txn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// ErrSnapshotTooOld: a read's start_ts is below the garbage collector's
// safe point, under which versions may be gone; it returned nothing.
// Begin a new transaction. errors.As finds a *SnapshotTooOldError.
var ErrSnapshotTooOld = errors.New("txn: snapshot too old")

// SnapshotTooOldError names the read's start_ts and the safe point.
type SnapshotTooOldError struct{ StartTS, SafePoint uint64 }

func (e *SnapshotTooOldError) Error() string {
	return fmt.Sprintf("txn: snapshot too old: start_ts %d is below the garbage collector's safe point %d (versions below it may be gone): begin a new transaction", e.StartTS, e.SafePoint)
}

// Is makes errors.Is(err, ErrSnapshotTooOld) true.
func (e *SnapshotTooOldError) Is(target error) bool { return target == ErrSnapshotTooOld }

// The safe point's record, owned here (doc.go, "Garbage collection"): the
// newest version of one cell of a reserved row; its timestamp is the safe
// point.
var gcRow = storage.ReservedRow("gc")

const (
	familyGC      = "gc"
	safePointQual = "safe_point"
	// cursorQual holds the collector's cursor: at version sp, the row a
	// pass below sp resumes at.
	cursorQual = "cursor"
)

type cursor struct {
	sp   uint64
	next []byte
}

// cursorQualOf is the cursor's qualifier for share i of n: cursorQual
// for a pass over every row, else one per share.
func cursorQualOf(i, n int) string {
	if n <= 1 {
		return cursorQual
	}
	return fmt.Sprintf("%s:%d/%d", cursorQual, i, n)
}

func readCursor(ctx context.Context, st storage.Store, qual string) (cursor, error) {
	r, err := st.ReadRow(ctx, gcRow, storage.Filter{{Family: familyGC, Qualifier: qual, Limit: 1}})
	if err != nil || len(r.Cells) == 0 {
		return cursor{}, err
	}
	return cursor{sp: r.Cells[0].TS, next: r.Cells[0].Value}, nil
}

// saveCursor records that a pass below sp goes on at next: one version,
// the older ones deleted.
func saveCursor(ctx context.Context, st storage.Store, qual string, sp uint64, next []byte) error {
	return st.Mutate(ctx, gcRow, storage.SetCell(familyGC, qual, sp, next),
		storage.Mutation{Kind: storage.DeleteCells, Family: familyGC, Qualifier: qual, Time: storage.Before(sp)})
}

// clearCursor records that the pass below sp finished.
func clearCursor(ctx context.Context, st storage.Store, qual string, sp uint64) error {
	return st.Mutate(ctx, gcRow, storage.Mutation{Kind: storage.DeleteCells, Family: familyGC, Qualifier: qual, Time: storage.Before(sp + 1)})
}

var safePointCell = storage.Filter{{Family: familyGC, Qualifier: safePointQual, Limit: 1}}

// SafePointCache bounds how long a client reads by a safe point it read:
// from when it sent that read, on its monotonic clock. The collector
// deletes below a new safe point only once it has been durable for
// longer (CollectDelay). A client re-reads it at most once per bound,
// and only while it reads: one small read a second.
const SafePointCache = time.Second

// CollectDelay is how long after a new safe point is durable the
// collector waits before deleting below it: SafePointCache and as much
// again, a margin for the rates of two processes' monotonic clocks (which
// differ by parts per million) and for the time from a read's return to
// its check.
const CollectDelay = 2 * SafePointCache

// ReadSafePoint returns the store's safe point, 0 when none was set.
func ReadSafePoint(ctx context.Context, st storage.Store) (uint64, error) {
	info, err := ReadSafePointInfo(ctx, st)
	return info.TS, err
}

// SafePointInfo is the safe point as stored: the timestamp, and the wall
// time at which the collector that set it sampled it (zero if unknown),
// for display: how far back snapshots stay readable.
type SafePointInfo struct {
	TS      uint64
	Sampled time.Time
}

// ReadSafePointInfo returns the store's safe point and when it was
// sampled.
func ReadSafePointInfo(ctx context.Context, st storage.Store) (SafePointInfo, error) {
	r, err := st.ReadRow(ctx, gcRow, safePointCell)
	if err != nil {
		return SafePointInfo{}, fmt.Errorf("txn: reading the safe point: %w", err)
	}
	if len(r.Cells) == 0 {
		return SafePointInfo{}, nil
	}
	info := SafePointInfo{TS: r.Cells[0].TS}
	if v := r.Cells[0].Value; len(v) == 8 {
		info.Sampled = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
	}
	return info, nil
}

// AdvanceSafePoint moves the store's safe point up to s, never down, and
// returns it as stored. One CheckAndMutate: it applies only where no
// version at or above s exists, so two collectors, a late copy or a
// retry can only leave the higher value.
func AdvanceSafePoint(ctx context.Context, st storage.Store, s uint64) (uint64, error) {
	return advanceSafePoint(ctx, st, s, time.Time{})
}

// advanceSafePoint is AdvanceSafePoint, recording when s was sampled.
func advanceSafePoint(ctx context.Context, st storage.Store, s uint64, sampled time.Time) (uint64, error) {
	var v []byte
	if !sampled.IsZero() {
		v = binary.BigEndian.AppendUint64(nil, uint64(sampled.UnixNano()))
	}
	if s == 0 {
		return 0, fmt.Errorf("%w: safe point 0", ErrInvalidArgument)
	}
	higher := storage.Filter{{Family: familyGC, Qualifier: safePointQual, Time: storage.From(s)}}
	if _, err := st.CheckAndMutate(ctx, gcRow, higher, nil, []storage.Mutation{
		storage.SetCell(familyGC, safePointQual, s, v),
		{Kind: storage.DeleteCells, Family: familyGC, Qualifier: safePointQual, Time: storage.Before(s)},
	}); err != nil {
		return 0, fmt.Errorf("txn: advancing the safe point: %w", err)
	}
	return ReadSafePoint(ctx, st)
}

// SafePointSource is a store that says its safe point itself: a server's,
// whose reserved rows its clients may not read.
type SafePointSource interface {
	SafePoint(ctx context.Context) (uint64, error)
	// SafePointSampled is the safe point and when it was sampled.
	SafePointSampled(ctx context.Context) (uint64, time.Time, error)
}

// ReadSafePointOf is ReadSafePointInfo, or the store's own answer where
// it is a SafePointSource.
func ReadSafePointOf(ctx context.Context, st storage.Store) (SafePointInfo, error) {
	if src, ok := st.(SafePointSource); ok {
		ts, sampled, err := src.SafePointSampled(ctx)
		return SafePointInfo{TS: ts, Sampled: sampled}, err
	}
	return ReadSafePointInfo(ctx, st)
}

// safePoints is a client's cached safe point.
type safePoints struct {
	mu sync.Mutex
	// value was read by a call sent at sent (valid once read).
	value uint64
	sent  time.Time
	valid bool
}

// get returns a safe point at least as high as st's was SafePointCache
// ago, reading it again when the cache is older: from the store itself,
// or, from a SafePointSource (a server), as it says.
func (s *safePoints) get(ctx context.Context, st storage.Store, bound time.Duration) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bound == 0 {
		bound = SafePointCache
	}
	if s.valid && time.Since(s.sent) < bound {
		return s.value, nil
	}
	sent := time.Now()
	var v uint64
	var err error
	if src, ok := st.(SafePointSource); ok {
		v, err = src.SafePoint(ctx)
	} else {
		v, err = ReadSafePoint(ctx, st)
	}
	if err != nil {
		return 0, err
	}
	s.value, s.sent, s.valid = max(s.value, v), sent, true
	return s.value, nil
}

// raise makes the cache at least sp: the collector's own, once sp is
// durable, so the readers of its client see it at once.
func (s *safePoints) raise(sp uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.value = max(s.value, sp)
}

// checkSnapshot fails a read at startTS that returned, if startTS is below
// the safe point: what it read may be missing versions collected while it
// read (doc.go, "Garbage collection": the check comes after the read).
func (c *Client) checkSnapshot(ctx context.Context, startTS uint64) error {
	sp, err := c.safePoints.get(ctx, c.store, c.opts.safePointCache)
	if err != nil {
		return err
	}
	if startTS < sp {
		return &SnapshotTooOldError{StartTS: startTS, SafePoint: sp}
	}
	return nil
}
