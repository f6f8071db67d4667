package txn

import (
	"context"
	"fmt"
	"strings"

	"github.com/seed-992972ee/percolator/storage"
)

// ReservedPrefix begins the system's own columns (observer acks); user
// columns may not begin with it.
const ReservedPrefix = "__"

// maxReservedColumn bounds a reserved column (an ack column names an
// observer and a user column).
const maxReservedColumn = 2*MaxColumnSize + 64

// Observed decides which columns' writes set a notification.
type Observed func(column string) bool

// Observers is the registry of observed columns that the protocol
// consults (the observer framework's). Safe for concurrent use.
//
// The contract that keeps observer invariant 2 (no committed write of an
// observed column without a notification) across processes: a
// registration is made durable, then the registry's version is raised,
// and only then are existing cells notified (the backfill). A committer
// builds its prewrites under one Snapshot; after its last prewrite has
// returned and before its commit point it calls Refresh, and if the
// version changed it writes the notifications the newer set asks for. A
// registration whose version was raised before that Refresh is seen; one
// raised after it runs its backfill after the committer's locks exist, so
// the backfill finds the lock or the commit record and notifies it.
type Observers interface {
	// Snapshot returns the set in effect and its version, from memory.
	Snapshot() (Observed, uint64)
	// Refresh returns the set as stored now and its version: on a store
	// shared with other processes it reads the stored version (and loads
	// the set again when it changed); on a store this process owns, every
	// registration passes through it and Snapshot is exact.
	Refresh(ctx context.Context) (Observed, uint64, error)
}

// AckReader is an Observers whose observers record, in reserved columns
// of a cell's row (acks), how far they have processed the cell. The
// garbage collector asks it before removing an observed column's newest
// delete record: once every ack is past the delete, no observer's dirty
// check needs the record any more.
type AckReader interface {
	// ProcessedPast reports whether every observer of column that keeps
	// an ack has processed the cell's commit at ts. value returns the
	// newest committed value of a column of the cell's row (ok false when
	// it has none). An observer registered later finds no record of the
	// cell, as if it had never been written: it never saw the value the
	// delete removed.
	ProcessedPast(column string, ts uint64, value func(column string) ([]byte, bool)) bool
}

// VersionedOracle is an Oracle that returns, with a timestamp, the
// observer registry's stored version read after allocating it (a
// server's oracle). A commit timestamp requested after the last prewrite
// then carries the registry re-read that notifyMissed needs, without a
// store call of its own.
type VersionedOracle interface {
	Oracle
	// TimestampVersion: ok is false when the oracle has no version.
	TimestampVersion(ctx context.Context) (ts, version uint64, ok bool, err error)
}

// RefreshedTo is an Observers that can refresh to a version read
// elsewhere (VersionedOracle).
type RefreshedTo interface {
	// RefreshTo returns the set at stored version v or later.
	RefreshTo(ctx context.Context, v uint64) (Observed, uint64, error)
}

// SetObservers installs the registry of observed columns. Every prewrite
// of a column it observes also writes a notification version in the same
// atomic row write as its lock (observer invariant 2: the notification
// exists before the write can become visible, whoever rolls it forward).
// Call it before the client is used concurrently.
func (c *Client) SetObservers(o Observers) { c.observers = o }

// observedSnapshot is the set a commit builds its prewrites under.
func (c *Client) observedSnapshot() (Observed, uint64) {
	if c.observers == nil {
		return nil, 0
	}
	return c.observers.Snapshot()
}

// notifyMutation is the notification a prewrite of m writes, if obs
// observes its column.
func (c *Client) notifyMutation(obs Observed, m *mutation, startTS uint64) (storage.Mutation, bool) {
	if !announced(obs, m) {
		return storage.Mutation{}, false
	}
	return storage.SetCell(FamilyNotify, m.col, startTS, encodeNotify(c.nowMS())), true
}

// announced reports whether a prewrite of m sets a notification under
// obs: a put or delete of an observed column. A lock-only mark
// (GetForUpdate) changes no value, so no observer has anything to see.
func announced(obs Observed, m *mutation) bool {
	return obs != nil && m.op != OpLock && obs(m.col)
}

// notifyAhead writes, on a store that keeps notifications apart, the
// notifications the prewrites of rows would carry, before any of them:
// one batch when the store batches. Elsewhere the prewrites carry them.
func (c *Client) notifyAhead(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed) error {
	if !c.notify.apart || obs == nil {
		return nil
	}
	var batch []storage.RowMutation
	for _, rw := range rows {
		var muts []storage.Mutation
		for _, m := range rw.muts {
			if announced(obs, m) {
				muts = append(muts, storage.SetCell(FamilyNotify, m.col, t.startTS, encodeNotifyAhead(c.nowMS())))
			}
		}
		if len(muts) > 0 {
			batch = append(batch, storage.RowMutation{Row: c.notify.row(rw.row), Mutations: muts})
		}
	}
	// Safe in any order, so without a nonce where the store offers that
	// (Client.batch): each is a notification at this transaction's
	// start_ts, and a late copy after a scanner cleared it brings back a
	// notification whose run finds the cell clean (or, if ahead of a
	// prewrite that never landed, is fenced and cleared again).
	var err error
	switch {
	case len(batch) == 0:
	case c.batch != nil && len(batch) > 1:
		for i := 0; i <= c.opts.StoreRetries && len(batch) > 0; i++ {
			var errs []error
			if errs, err = c.batch.MutateRows(ctx, batch); err != nil {
				if !retryable(err) {
					break
				}
				continue
			}
			// Send again only the rows that failed (each write is
			// idempotent: the same version of the same cell).
			var again []storage.RowMutation
			err = nil
			for j, e := range errs {
				if e != nil {
					again, err = append(again, batch[j]), e
				}
			}
			if err != nil && !retryable(err) {
				break
			}
			batch = again
		}
	default:
		for _, b := range batch {
			if err = c.mutate(ctx, b.Row, b.Mutations...); err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("txn: writing the notifications ahead of the prewrites: %w", err)
	}
	return nil
}

// notifyMissed runs between a commit's last prewrite and its commit point:
// if the registry changed since the prewrites were built (obs at version
// ver), it durably writes the notifications the current set asks for and
// the old one did not (Observers, the contract). A notification of a
// transaction that then aborts is harmless: its run finds the cell clean.
func (c *Client) notifyMissed(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed, ver uint64) error {
	if c.observers == nil {
		return nil
	}
	now, nowVer, err := c.observers.Refresh(ctx)
	if err != nil {
		return err
	}
	return c.notifyNewlyObserved(ctx, t, rows, obs, ver, now, nowVer)
}

// notifyNewlyObserved writes the notifications that the registry at
// nowVer asks for and the one at ver (the prewrites') did not.
func (c *Client) notifyNewlyObserved(ctx context.Context, t *Txn, rows []*rowWrites, obs Observed, ver uint64, now Observed, nowVer uint64) error {
	if nowVer == ver || now == nil {
		return nil
	}
	for _, rw := range rows {
		var muts []storage.Mutation
		for _, m := range rw.muts {
			if n, ok := c.notifyMutation(now, m, t.startTS); ok && !announced(obs, m) {
				muts = append(muts, n)
			}
		}
		if len(muts) > 0 {
			// Safe in any order, as notifyAhead's.
			if err := c.mutate(ctx, c.notify.row(rw.row), muts...); err != nil {
				return fmt.Errorf("txn: notifying a newly observed column: %w", err)
			}
		}
	}
	return nil
}

// CommitTS returns the commit_ts of the newest version of (row, column)
// in t's snapshot, deletions included and lock-only records (OpLock)
// skipped, or 0 if the cell has none. Like Get, it waits on or resolves
// every older lock first. Reserved columns are allowed.
func CommitTS(ctx context.Context, t *Txn, row, column string) (uint64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if err := validateAnyCell(row, column); err != nil {
		return 0, err
	}
	var ts uint64
	err := t.fromStable(ctx, func() error {
		err := t.c.untilSettled(ctx, func() (err error) {
			_, ts, _, err = t.c.visibleCommit(ctx, t.startTS, []byte(row), column)
			return err
		})
		if err == nil || ctx.Err() == nil {
			// A commit's absence may be what a collection left (safepoint.go).
			if serr := t.c.checkSnapshot(ctx, t.startTS); serr != nil {
				err = serr
			}
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return ts, nil
}

// GetReserved is Get for a reserved column (ReservedPrefix): the
// observer framework's acks. Not for users' data.
func GetReserved(ctx context.Context, t *Txn, row, column string) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := validateReserved(row, column); err != nil {
		return nil, err
	}
	if i, ok := t.find([]byte(row), column); ok {
		return append([]byte(nil), t.writes[i].value...), nil
	}
	return t.c.get(ctx, t.startTS, []byte(row), column)
}

// SetReserved is Set for a reserved column (ReservedPrefix).
func SetReserved(t *Txn, row, column string, value []byte) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.readOnly {
		return ErrReadOnly
	}
	if err := validateReserved(row, column); err != nil {
		return err
	}
	return t.buffer(mutation{row: []byte(row), col: column, op: OpPut, value: append([]byte{}, value...)})
}

func validateReserved(row, column string) error {
	if !strings.HasPrefix(column, ReservedPrefix) {
		return fmt.Errorf("%w: column %q is not reserved", ErrInvalidArgument, column)
	}
	return validateAnyCell(row, column)
}

// validateAnyCell checks a row and a user or reserved column.
func validateAnyCell(row, column string) error {
	if strings.HasPrefix(column, ReservedPrefix) {
		switch {
		case len(column) > maxReservedColumn:
			return fmt.Errorf("%w: column of %d bytes exceeds %d", ErrInvalidArgument, len(column), maxReservedColumn)
		case strings.ContainsRune(column, 0):
			return fmt.Errorf("%w: column %q contains NUL", ErrInvalidArgument, column)
		}
		return validateCell(row, "x")
	}
	return validateCell(row, column)
}

// ValidateCell checks a user's row and column as Set does.
func ValidateCell(row, column string) error { return validateCell(row, column) }

// ValidateColumn checks a user column name as Set does.
func ValidateColumn(column string) error { return validateCell("x", column) }
