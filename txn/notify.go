package txn

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/seed-992972ee/percolator/storage"
)

// FamilyNotify holds notifications: a version per announced write of an
// observed column, at the writer's start_ts, its value the writer's wall
// time in milliseconds. It is its own keyspace (the paper's locality
// group): scanners read it without touching data.
const FamilyNotify = "notify"

// ReservedPrefix begins the system's own columns (observer acks); user
// columns may not begin with it.
const ReservedPrefix = "__"

// maxReservedColumn bounds a reserved column (an ack column names an
// observer and a user column).
const maxReservedColumn = 2*MaxColumnSize + 64

// Observed decides which columns' writes set a notification.
type Observed func(column string) bool

// SetObserved installs the set of observed columns: every prewrite of a
// column for which fn reports true also writes a notification version in
// the same atomic row write as its lock (observer invariant 2: the
// notification exists before the write can become visible, whoever rolls
// it forward). It returns after every prewrite that built its writes with
// the previous set has finished, so a caller may then scan for writes the
// previous set missed.
func (c *Client) SetObserved(fn Observed) {
	c.observedMu.Lock()
	c.observed = fn
	c.observedMu.Unlock()
}

// notifyMutation is the notification a prewrite of col writes, if any.
// Called with observedMu read-held.
func (c *Client) notifyMutation(col string, startTS uint64) (storage.Mutation, bool) {
	if c.observed == nil || !c.observed(col) {
		return storage.Mutation{}, false
	}
	return storage.SetCell(FamilyNotify, col, startTS, EncodeNotify(c.nowMS())), true
}

// EncodeNotify is a notification's value: the wall time it was set, in
// Unix milliseconds.
func EncodeNotify(wallMS uint64) []byte { return binary.BigEndian.AppendUint64(nil, wallMS) }

// DecodeNotify returns the wall time of a notification value (0 if the
// value is not one).
func DecodeNotify(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// CommitTS returns the commit_ts of the newest version of (row, column)
// in t's snapshot, deletions included, or 0 if the cell has none. Like
// Get, it waits on or resolves every older lock first. Reserved columns
// are allowed.
func CommitTS(ctx context.Context, t *Txn, row, column string) (uint64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if err := validateAnyCell(row, column); err != nil {
		return 0, err
	}
	var ts uint64
	err := t.c.untilSettled(ctx, func() (err error) {
		_, ts, _, err = t.c.visibleCommit(ctx, t.startTS, []byte(row), column)
		return err
	})
	return ts, err
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
	if i, ok := t.pos[cellKey([]byte(row), column)]; ok {
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
	t.buffer(mutation{row: []byte(row), col: column, op: OpPut, value: append([]byte{}, value...)})
	return nil
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

// ValidateColumn checks a user column name as Set does.
func ValidateColumn(column string) error { return validateCell("x", column) }
