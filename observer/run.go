package observer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// cell runs every observer of (row, col) that the change makes dirty, and
// clears the notification versions seen once all are done. did reports
// that it ran an observer or cleared something; left, that work remains.
func (f *Framework) cell(ctx context.Context, key []byte, col string, regs []*registration, seen, ahead []uint64) (did, left bool, err error) {
	row := string(key)
	if len(regs) == 0 {
		return f.clearOrphans(ctx, key, col, seen)
	}
	done, durable := true, false
	minStart := uint64(0)
	for _, g := range regs {
		if f.fails.waiting(row, col, g.name) {
			done = false
			continue
		}
		start, ok, ran, quarantined, err := f.runOne(ctx, row, col, g)
		if err != nil {
			return did, true, err
		}
		did = did || ran
		durable = durable || quarantined
		if minStart == 0 || start < minStart {
			minStart = start
		}
		done = done && ok
	}
	if !done {
		return did, true, nil
	}
	cleared, err := f.clear(ctx, key, col, seen, ahead, minStart, durable)
	return did || cleared, !cleared, err
}

// runOne runs g on (row, col) in its own transaction, whose start_ts is
// start. ok reports that g needs nothing more for this change (it
// committed, found the cell clean, or was quarantined); ran, that g's
// code ran; quarantined, that this run quarantined the notification. An
// error that a later run would meet again (a corrupt record, an observer
// that ends its own transaction) is a failure of g on this cell, counted
// towards quarantine like an error g returns.
func (f *Framework) runOne(ctx context.Context, row, col string, g *registration) (start uint64, ok, ran, quarantined bool, err error) {
	tx, err := f.client.Begin(ctx)
	if err != nil {
		return 0, false, false, false, err
	}
	start = tx.StartTS()
	txn.Manage(tx)
	ack := AckColumn(g.name, col)
	if !g.weak {
		dirty, err := f.dirty(ctx, tx, row, col, ack)
		if err != nil || !dirty {
			_ = txn.RollbackManaged(ctx, tx)
			if err == nil || transient(err) != nil {
				return start, err == nil, false, false, transient(err)
			}
			q, err := f.failed(ctx, row, col, g, fmt.Errorf("observer: checking whether the cell changed: %w", err))
			return start, q, false, q, err
		}
	}
	f.stats.add(g.name, statRuns, 1)
	if err := call(ctx, g.fn, tx, row, col); err != nil {
		_ = txn.RollbackManaged(ctx, tx)
		if errors.Is(err, txn.ErrConflict) {
			f.stats.add(g.name, statConflicts, 1)
			return start, false, true, false, nil
		}
		if unreachable(err) { // the store's failure, not the observer's
			return start, false, true, false, err
		}
		q, err := f.failed(ctx, row, col, g, err)
		return start, q, true, q, err
	}
	if !g.weak {
		if err := txn.SetReserved(tx, row, ack, binary.BigEndian.AppendUint64(nil, start)); err != nil {
			_ = txn.RollbackManaged(ctx, tx)
			q, err := f.failed(ctx, row, col, g, err)
			return start, q, true, q, err
		}
	}
	self := txn.Writes(tx, row, col)
	if self && f.loops.count(row, col, g.name)+1 >= selfTriggerLimit {
		_ = txn.RollbackManaged(ctx, tx)
		return start, true, true, true, f.stopLoop(ctx, row, col, g)
	}
	switch err := txn.CommitManaged(ctx, tx); {
	case err == nil:
		f.stats.add(g.name, statCommits, 1)
		f.fails.reset(row, col, g.name)
		f.countSelfTrigger(row, col, g, self)
		return start, true, true, false, nil
	case errors.Is(err, txn.ErrConflict):
		// Another run of this change won the ack, or the observer's
		// writes lost a race: the notification stays for a later run.
		f.stats.add(g.name, statConflicts, 1)
		return start, false, true, false, nil
	case transient(err) != nil:
		return start, false, true, false, err
	default:
		q, err := f.failed(ctx, row, col, g, fmt.Errorf("observer: commit failed: %w", err))
		return start, q, true, q, err
	}
}

// selfTriggerLimit is how many runs in a row of an observer that each
// write the cell it observes make a loop: each such commit is a new change
// of the cell, so the observer runs again, forever unless it stops
// writing (an observer that normalizes a value writes once more, then
// finds nothing to change).
const selfTriggerLimit = 8

// countSelfTrigger counts a committed run that wrote its own observed
// cell (self); a run that did not resets the count.
func (f *Framework) countSelfTrigger(row, col string, g *registration, self bool) {
	if !self {
		f.loops.reset(row, col, g.name)
		return
	}
	f.stats.add(g.name, statSelfTriggers, 1)
	f.loops.record(row, col, g.name, 0)
}

// stopLoop quarantines the notification of a run that would have been the
// selfTriggerLimit-th in a row to write the cell it observes; the run was
// rolled back, so the notification can be cleared.
func (f *Framework) stopLoop(ctx context.Context, row, col string, g *registration) error {
	f.stats.add(g.name, statSelfTriggers, 1)
	f.loops.reset(row, col, g.name)
	f.opts.Logger.Error("observer: writes the cell it observes on every run (a loop)", "observer", g.name, "row", row, "column", col)
	return f.quarantine(ctx, row, col, g, selfTriggerLimit,
		fmt.Errorf("observer %q wrote the cell it observes (%q/%s) in %d runs in a row: a self-trigger loop", g.name, row, col, selfTriggerLimit))
}

// transient returns the errors that are not the observer's failure —
// the run's context ended, the store closed or could not be reached, a
// commit whose outcome could not be learned — and nil for the others,
// which count against the observer (MaxFailures quarantines). The errors
// it returns end the scanner's pass, which backs off and scans again
// (outage.go): the notification stays, and no failure is counted.
func transient(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, storage.ErrClosed) || unreachable(err) {
		return err
	}
	return nil
}

// unreachable reports whether err says the store, the oracle or the
// coordination service could not be reached, or a commit's outcome could
// not be learned.
func unreachable(err error) bool {
	return errors.Is(err, storage.ErrUnavailable) || errors.Is(err, txn.ErrCommitUnknown)
}

// dirty reports whether (row, col)'s newest commit in tx's snapshot is
// newer than the observer's ack (invariant 3).
func (f *Framework) dirty(ctx context.Context, tx *txn.Txn, row, col, ack string) (bool, error) {
	latest, err := txn.CommitTS(ctx, tx, row, col)
	if err != nil || latest == 0 {
		return false, err
	}
	v, err := txn.GetReserved(ctx, tx, row, ack)
	switch {
	case errors.Is(err, txn.ErrNotFound):
		return true, nil
	case err != nil:
		return false, err
	case len(v) != 8:
		return true, nil
	}
	return latest > binary.BigEndian.Uint64(v), nil
}

// call runs fn, turning a panic into an error.
func call(ctx context.Context, fn Func, tx *txn.Txn, row, col string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("observer panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx, tx, row, col)
}
