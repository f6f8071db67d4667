package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator/storage"
)

// Limits on user input.
const (
	// MaxRowSize leaves room for notifyRowPrefix within the store's key
	// limit, on every backend alike.
	MaxRowSize    = storage.MaxRowKeySize - len(notifyRowPrefix)
	MaxColumnSize = 256
)

// Txn is one snapshot-isolation transaction. It is not safe for
// concurrent use: one goroutine drives it from Begin to Commit or Rollback.
type Txn struct {
	c        *Client
	startTS  uint64
	readOnly bool
	// stable: startTS came from stableStart and nothing was read at it
	// yet (fromStable).
	stable bool
	done   bool
	// managed: a framework (the observers') ends the transaction; Commit
	// and Rollback called by its user fail with ErrManaged.
	managed bool
	// writes buffers the transaction's writes in first-write order, but
	// for the primary, writes[0]. Invariant: at most one entry per cell,
	// and writes[0] is a put or a delete whenever one is buffered
	// (primaryFirst): the collector removes a lock-only commit record
	// below the safe point even when it is its cell's newest, and a
	// primary's commit record is what its secondaries are rolled forward
	// from.
	writes []mutation
	pos    map[string]int // cell key → index in writes, once there are more than posAfter
	bytes  int            // the writes' size (writeSize), summed
}

type mutation struct {
	row   []byte
	col   string
	op    Op
	value []byte
}

// Begin starts a read-write transaction at a fresh start_ts.
func (c *Client) Begin(ctx context.Context) (*Txn, error) { return c.begin(ctx, false) }

// BeginReadOnly starts a read-only transaction: it never writes a lock
// (it may still resolve the locks of others it meets).
func (c *Client) BeginReadOnly(ctx context.Context) (*Txn, error) { return c.begin(ctx, true) }

func (c *Client) begin(ctx context.Context, readOnly bool) (*Txn, error) {
	t := &Txn{c: c, readOnly: readOnly}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// BeginDeferred starts a transaction (read-only if readOnly) whose start
// timestamp is taken by its first operation that needs one: where the
// store reads at a timestamp it takes (storage.FreshReader: a server),
// the first Get or GetMany brings it with its reads, one round trip
// fewer (doc.go, "Durability over RPC"). Elsewhere it is Begin (or
// BeginReadOnly).
func (c *Client) BeginDeferred(ctx context.Context, readOnly bool) (*Txn, error) {
	if !c.defersStart() {
		return c.begin(ctx, readOnly)
	}
	return &Txn{c: c, readOnly: readOnly}, nil
}

// defersStart reports whether BeginDeferred leaves the start timestamp
// to the first read: the store takes one with its reads (and has not
// refused), and no index or test hook wants it at Begin.
func (c *Client) defersStart() bool {
	return c.fresh != nil && !c.noFresh.Load() && c.index == nil && c.opts.afterStartTS == nil
}

// start takes t's start timestamp, unless it has one: for a read-only
// transaction on a store this client owns, one above the newest commit
// it acknowledged or returned (stableStart; doc.go, "Read-only
// snapshots"), else a fresh one from the oracle.
func (t *Txn) start(ctx context.Context) error {
	if t.startTS != 0 {
		return nil
	}
	if t.readOnly {
		if ts, ok := t.c.stableStart(ctx); ok {
			if t.c.opts.afterStartTS != nil {
				t.c.opts.afterStartTS()
			}
			t.begun(ts)
			t.stable = true
			return nil
		}
	}
	return t.startFresh(ctx)
}

// startFresh takes t's start timestamp from the oracle.
func (t *Txn) startFresh(ctx context.Context) error {
	ts, err := t.c.oracle.Timestamp(ctx)
	if err != nil {
		return fmt.Errorf("txn: start timestamp: %w", err)
	}
	if t.c.index != nil {
		t.c.index.offerBase(ts)
		t.c.stable.floor(ts)
	}
	if t.c.opts.afterStartTS != nil {
		t.c.opts.afterStartTS()
	}
	t.begun(ts)
	return nil
}

// begun makes ts t's start timestamp: from the oracle (start) or from a
// read that took it (getFresh, where there is no index).
func (t *Txn) begun(ts uint64) {
	t.c.active.add(ts)
	t.startTS = ts
}

// StartTS is StartTSContext without a context (the oracle bounds its own
// calls): 0 where StartTSContext returns an error.
func (t *Txn) StartTS() uint64 {
	ts, _ := t.StartTSContext(context.Background())
	return ts
}

// StartTSContext returns the snapshot timestamp, the one every read of t
// reads at. A transaction begun with BeginDeferred that has none yet
// takes it now from the oracle, the call bounded by ctx. A read-only
// transaction's may be shared with others ("Read-only snapshots" in
// doc.go); one taken above the newest acknowledged commit and not read
// at yet, which its first read could still replace, is replaced by a
// fresh one first (restartFresh), so the caller is told the snapshot
// every read will use. If the oracle fails, the error is returned and t
// has no start timestamp yet: a later call, or t's first read, takes
// one. A transaction that ended returns the one it had, or
// ErrTxnFinished if it had none.
func (t *Txn) StartTSContext(ctx context.Context) (uint64, error) {
	if t.done {
		if t.startTS == 0 {
			return 0, ErrTxnFinished
		}
		return t.startTS, nil
	}
	if t.stable {
		if err := t.restartFresh(ctx); err != nil {
			return 0, err
		}
	}
	if t.startTS == 0 {
		// Fresh, not start's stable one: the caller is told it.
		if err := t.startFresh(ctx); err != nil {
			return 0, err
		}
	}
	return t.startTS, nil
}

// ReadOnly reports whether the transaction was begun read-only.
func (t *Txn) ReadOnly() bool { return t.readOnly }

// Get returns the value of (row, column) in the snapshot at StartTS, or
// the transaction's own buffered write. ErrNotFound when absent.
func (t *Txn) Get(ctx context.Context, row, column string) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := validateCell(row, column); err != nil {
		return nil, err
	}
	return t.get(ctx, row, column)
}

// get is Get of a valid cell.
func (t *Txn) get(ctx context.Context, row, column string) ([]byte, error) {
	if m := t.own(row, column); m != nil {
		if m.op == OpDelete {
			return nil, ErrNotFound
		}
		return append([]byte(nil), m.value...), nil
	}
	if t.startTS == 0 {
		values := make([][]byte, 1)
		done, err := t.c.getFresh(ctx, t, []CellKey{{Row: row, Column: column}}, []int{0}, values)
		switch {
		case err != nil:
			return nil, err
		case done && values[0] == nil:
			return nil, ErrNotFound
		case done:
			return values[0], nil
		}
	}
	return t.getAt(ctx, []byte(row), column)
}

// getAt is Client.get at t's snapshot, through fromStable.
func (t *Txn) getAt(ctx context.Context, row []byte, column string) ([]byte, error) {
	if !t.stable {
		return t.c.get(ctx, t.startTS, row, column)
	}
	var v []byte
	err := t.fromStable(ctx, func() (err error) {
		v, err = t.c.get(ctx, t.startTS, row, column)
		return err
	})
	return v, err
}

// own returns t's buffered put or delete of (row, column), or nil (a
// lock-only mark changes no value).
func (t *Txn) own(row, column string) *mutation {
	i, ok := t.find([]byte(row), column)
	if !ok || t.writes[i].op == OpLock {
		return nil
	}
	return &t.writes[i]
}

// GetForUpdate is Get, and marks (row, column) for a lock-only write: at
// Commit the cell is locked and committed as an OpLock record, which
// changes no value but conflicts as a write does with every concurrent
// transaction that writes the cell or reads it for update (doc.go, "Write
// skew"). A Set or Delete of the cell in t, before or after, takes the
// mark's place. The mark counts towards the transaction's limits as a
// write of an empty value; it is not made when the read fails (ErrNotFound
// aside: an absent cell is marked too). ErrReadOnly in a read-only
// transaction.
func (t *Txn) GetForUpdate(ctx context.Context, row, column string) ([]byte, error) {
	if err := t.writable(row, column); err != nil {
		return nil, err
	}
	v, err := t.get(ctx, row, column)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if _, ok := t.find([]byte(row), column); !ok {
		if berr := t.buffer(mutation{row: []byte(row), col: column, op: OpLock}); berr != nil {
			return nil, berr
		}
	}
	return v, err
}

// Set buffers a write of value to (row, column). The value is copied.
func (t *Txn) Set(row, column string, value []byte) error {
	if err := t.writable(row, column); err != nil {
		return err
	}
	if len(value) > t.c.opts.MaxValueSize {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", ErrInvalidArgument, len(value), t.c.opts.MaxValueSize)
	}
	return t.buffer(mutation{row: []byte(row), col: column, op: OpPut, value: append([]byte{}, value...)})
}

// Delete buffers a deletion of (row, column).
func (t *Txn) Delete(row, column string) error {
	if err := t.writable(row, column); err != nil {
		return err
	}
	return t.buffer(mutation{row: []byte(row), col: column, op: OpDelete})
}

// buffer adds m, or replaces the write of its cell, within the limits:
// past them it buffers nothing and fails with ErrTxnTooLarge.
func (t *Txn) buffer(m mutation) error {
	i, replace := t.find(m.row, m.col)
	size := t.bytes + writeSize(&m)
	if replace {
		size -= writeSize(&t.writes[i])
	}
	switch o := &t.c.opts; {
	case !replace && len(t.writes) >= o.MaxTxnWrites:
		return fmt.Errorf("%w: more than %d writes (Options.MaxTxnWrites)", ErrTxnTooLarge, o.MaxTxnWrites)
	case size > o.MaxTxnBytes:
		return fmt.Errorf("%w: writes of %d bytes exceed %d (Options.MaxTxnBytes)", ErrTxnTooLarge, size, o.MaxTxnBytes)
	}
	t.bytes = size
	if replace {
		t.writes[i] = m
	} else {
		i = len(t.writes)
		t.writes = append(t.writes, m)
		t.indexWrite(i)
	}
	t.primaryFirst(i)
	return nil
}

// posAfter is how many buffered writes find searches one by one before
// it keeps an index of them (pos): most transactions write a cell or two.
const posAfter = 8

// find returns the index in t.writes of the write of (row, col).
func (t *Txn) find(row []byte, col string) (int, bool) {
	if t.pos != nil {
		i, ok := t.pos[cellKey(row, col)]
		return i, ok
	}
	for i := range t.writes {
		if w := &t.writes[i]; w.col == col && bytes.Equal(w.row, row) {
			return i, true
		}
	}
	return 0, false
}

// indexWrite notes writes[i], just appended, in pos: all of them once
// there are more than posAfter.
func (t *Txn) indexWrite(i int) {
	switch {
	case t.pos != nil:
		t.pos[cellKey(t.writes[i].row, t.writes[i].col)] = i
	case len(t.writes) > posAfter:
		t.pos = make(map[string]int, 2*len(t.writes))
		for j := range t.writes {
			t.pos[cellKey(t.writes[j].row, t.writes[j].col)] = j
		}
	}
}

// primaryFirst moves writes[i] to the front when it is a put or a delete
// and the front holds a lock-only mark (the invariant on Txn.writes).
func (t *Txn) primaryFirst(i int) {
	if i == 0 || t.writes[0].op != OpLock || t.writes[i].op == OpLock {
		return
	}
	w := t.writes
	w[0], w[i] = w[i], w[0]
	if t.pos != nil {
		t.pos[cellKey(w[0].row, w[0].col)] = 0
		t.pos[cellKey(w[i].row, w[i].col)] = i
	}
}

// writeSize is what a buffered write counts towards MaxTxnBytes: its
// row, column and value.
func writeSize(m *mutation) int { return len(m.row) + len(m.col) + len(m.value) }

// lockTTL is how long the transaction's locks stay valid without a
// heartbeat: Options.LockTTL, plus, for a large transaction, a term that
// grows with the square root of its size (TiKV's rule: 6s per √MiB),
// capped at MaxLockTTLGrowth, so that the commit of many writes is not
// judged dead midway by a reader that cannot ask its owner's liveness.
func (t *Txn) lockTTL() time.Duration {
	grow := time.Duration(float64(6*time.Second) * math.Sqrt(float64(t.bytes)/(1<<20)))
	return t.c.opts.LockTTL + min(grow, MaxLockTTLGrowth)
}

// MaxLockTTLGrowth caps what a transaction's size adds to its lock TTL.
const MaxLockTTLGrowth = 50 * time.Second

// Rollback abandons the transaction. Nothing was written before Commit,
// so there is nothing to undo.
func (t *Txn) Rollback(context.Context) error {
	switch {
	case t.managed:
		return ErrManaged
	case t.done:
		return ErrTxnFinished
	}
	t.done = true
	if t.startTS != 0 {
		t.c.active.remove(t.startTS)
	}
	return nil
}

// Commit makes the buffered writes visible atomically, or returns an error
// and makes none visible (ErrConflict on a write-write conflict), or
// returns ErrCommitUnknown when the outcome could not be learned.
func (t *Txn) Commit(ctx context.Context) error {
	switch {
	case t.managed:
		return ErrManaged
	case t.done:
		return ErrTxnFinished
	}
	if len(t.writes) == 0 {
		t.done = true
		if t.startTS != 0 {
			t.c.active.remove(t.startTS)
		}
		return nil
	}
	if err := t.start(ctx); err != nil {
		// Nothing was written: the transaction ends with the error.
		t.done = true
		return err
	}
	t.done = true
	defer t.c.active.remove(t.startTS)
	return t.c.commit(ctx, t)
}

func (t *Txn) usable() error {
	if t.done {
		return ErrTxnFinished
	}
	return nil
}

func (t *Txn) writable(row, column string) error {
	if err := t.usable(); err != nil {
		return err
	}
	if t.readOnly {
		return ErrReadOnly
	}
	return validateCell(row, column)
}

// validateCell checks a user's row and column. A column must not contain
// ':' or NUL (the protocol's metadata columns are named c:lock, c:write,
// c:data, c:notify, c:ack_<observer>) nor start with "__" (reserved for the
// system's own columns).
func validateCell(row, column string) error {
	switch {
	case row == "":
		return fmt.Errorf("%w: empty row", ErrInvalidArgument)
	case len(row) > MaxRowSize:
		return fmt.Errorf("%w: row of %d bytes exceeds %d", ErrInvalidArgument, len(row), MaxRowSize)
	case strings.HasPrefix(row, storage.ReservedPrefix):
		return fmt.Errorf("%w: row %s begins with %q, reserved for the system's own rows", ErrInvalidArgument, storage.QuoteRow([]byte(row)), storage.ReservedPrefix)
	case column == "":
		return fmt.Errorf("%w: empty column", ErrInvalidArgument)
	case len(column) > MaxColumnSize:
		return fmt.Errorf("%w: column of %d bytes exceeds %d", ErrInvalidArgument, len(column), MaxColumnSize)
	case strings.ContainsAny(column, ":\x00"):
		return fmt.Errorf("%w: column %q contains ':' or NUL, reserved for the protocol's columns", ErrInvalidArgument, column)
	case strings.HasPrefix(column, "__"):
		return fmt.Errorf("%w: column %q starts with the reserved prefix \"__\"", ErrInvalidArgument, column)
	}
	return nil
}

// Manage hands t to a framework that ends it (the observers' runs): from
// then on Commit and Rollback called on t fail with ErrManaged and change
// nothing; the framework ends it with CommitManaged or RollbackManaged.
func Manage(t *Txn) { t.managed = true }

// CommitManaged commits a managed transaction (the framework's call).
func CommitManaged(ctx context.Context, t *Txn) error {
	t.managed = false
	return t.Commit(ctx)
}

// RollbackManaged rolls a managed transaction back (the framework's call).
func RollbackManaged(ctx context.Context, t *Txn) error {
	t.managed = false
	return t.Rollback(ctx)
}

// Managed reports whether t is ended by a framework.
func (t *Txn) Managed() bool { return t.managed }

// Writes reports whether t has a buffered put or delete of (row, column)
// (a lock-only mark, GetForUpdate's, is no write of the cell's value).
func Writes(t *Txn, row, column string) bool { return t.own(row, column) != nil }
