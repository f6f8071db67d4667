package txn

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"time"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/storage"
)

// FamilyNotify holds notifications: a version per announced write of an
// observed column, at the writer's start_ts, its value the writer's wall
// time in milliseconds. It is its own keyspace (the paper's locality
// group): scanners read it without touching data.
//
// On a store whose families share rows (storage.SharedRows: Cloud
// Bigtable has no locality groups, so a family filter still reads every
// cell of the rows it passes) the notifications of row r live in a row of
// their own, under notifyRowPrefix: finding them reads only
// notifications. They cannot then share the prewrite's atomic row write,
// so the prewrite's notifications are written before it, marked as ahead:
// a notification ahead of its write is harmless, and a clear of one whose
// prewrite has not landed fences that prewrite off (NotifySpace.Clear;
// observer's doc.go, invariant 2).
const FamilyNotify = "notify"

// notifyRowPrefix begins the rows that hold notifications on a store
// whose families share rows. User rows are shorter than
// storage.MaxRowKeySize by its length (MaxRowSize), on every backend.
const notifyRowPrefix = "\xff\xfen"

// notifyAll selects every notification of a row.
var notifyAll = storage.Filter{{Family: FamilyNotify, AllQualifiers: true}}

// NotifySpace is the notify keyspace of one store: where each data row's
// notifications live, and the only way to write, find and clear them.
// Its callers (the observer framework) speak of data rows only; the
// layout (a family beside the data, or rows of their own on a store whose
// families share rows) and the values' encoding stay here. Safe for
// concurrent use.
type NotifySpace struct {
	store storage.Store
	apart bool // notifications live in rows of their own
	now   func() time.Time
}

// Notifications returns the notify keyspace of c's store.
func (c *Client) Notifications() NotifySpace { return c.notify }

// separateNotify reports whether store keeps notifications in rows of
// their own: a store whose families share rows.
func separateNotify(store storage.Store) bool {
	sr, ok := store.(storage.SharedRows)
	return ok && sr.SharedRows()
}

// Apart reports whether notifications live in rows of their own, apart
// from the data rows they announce.
func (n NotifySpace) Apart() bool { return n.apart }

// row is where row's notifications live.
func (n NotifySpace) row(row []byte) []byte {
	if !n.apart {
		return row
	}
	return append(append(make([]byte, 0, len(notifyRowPrefix)+len(row)), notifyRowPrefix...), row...)
}

// span maps the data-row range [start, end) (nil: unbounded) to the rows
// that hold their notifications.
func (n NotifySpace) span(start, end []byte) ([]byte, []byte) {
	if !n.apart {
		return start, end
	}
	if end == nil {
		return n.row(start), storage.PrefixEnd([]byte(notifyRowPrefix))
	}
	return n.row(start), n.row(end)
}

// Notification is one notification version of a column of a data row.
type Notification struct {
	Column string
	// TS is the version: the announced writer's start_ts, or the
	// timestamp of whoever set it (a backfill, a weak Notify, a retry).
	TS uint64
	// WallMS is when it was set, in Unix milliseconds (0: unknown).
	WallMS uint64
	// Ahead reports that it was written ahead of its prewrite, which may
	// not have landed: Clear fences such a prewrite off.
	Ahead bool
}

// Scan calls fn with the data row and the notifications, in column and
// then version order, of each data row in [start, end) (nil: unbounded)
// that has any, in row order, up to limit rows (0: all), until fn returns
// false. It reads the notify keyspace only, and returns how many keys the
// store visited finding them (0 on a store that does not count). fn may
// keep what it is given.
func (n NotifySpace) Scan(ctx context.Context, start, end []byte, limit int, fn func(row []byte, ns []Notification) bool) (uint64, error) {
	s, e := n.span(start, end)
	each := func(r storage.Row) bool {
		key := r.Key
		if n.apart {
			if !bytes.HasPrefix(key, []byte(notifyRowPrefix)) {
				return true // a user row that sorts among them: not ours
			}
			key = key[len(notifyRowPrefix):]
		}
		ns := make([]Notification, len(r.Cells))
		for i, c := range r.Cells {
			ns[i] = Notification{Column: c.Qualifier, TS: c.TS, WallMS: decodeNotify(c.Value), Ahead: notifyAhead(c.Value)}
		}
		return fn(key, ns)
	}
	if c, ok := n.store.(storage.Counted); ok {
		return c.ScanCounted(ctx, s, e, notifyAll, limit, each)
	}
	return 0, n.store.Scan(ctx, s, e, notifyAll, limit, each)
}

// Read returns the notifications of one data row, as Scan gives them.
func (n NotifySpace) Read(ctx context.Context, row []byte) ([]Notification, error) {
	var out []Notification
	_, err := n.Scan(ctx, row, append(bytes.Clone(row), 0), 1, func(_ []byte, ns []Notification) bool {
		out = ns
		return false
	})
	return out, err
}

// Set durably writes a notification of column at version ts on each of
// rows: one batch where the store batches. Safe to apply twice in any
// order, so sent without a nonce where the store offers that: each is a
// version at the caller's own fresh timestamp, and a late copy after a
// scanner cleared it brings back a notification whose run finds the cell
// clean (weak observers may run more than once).
func (n NotifySpace) Set(ctx context.Context, rows [][]byte, column string, ts uint64) error {
	wall := encodeNotify(uint64(n.now().UnixMilli()))
	if send := idempotentBatch(n.store); send != nil {
		batch := make([]storage.RowMutation, len(rows))
		for i, row := range rows {
			batch[i] = storage.RowMutation{Row: n.row(row), Mutations: []storage.Mutation{storage.SetCell(FamilyNotify, column, ts, wall)}}
		}
		errs, err := send(ctx, batch)
		for _, e := range errs {
			if err == nil {
				err = e
			}
		}
		return err
	}
	for _, row := range rows {
		if err := n.store.Mutate(ctx, n.row(row), storage.SetCell(FamilyNotify, column, ts, wall)); err != nil {
			return err
		}
	}
	return nil
}

// Requeue writes a notification of column at ts on row together with
// also, mutations of row itself (a quarantine record's delete): in one
// atomic row write where notifications share the data rows, else the
// notification first, so that a crash between the two leaves both,
// never neither. Safe in any order as Set's, if also's mutations are.
func (n NotifySpace) Requeue(ctx context.Context, row []byte, column string, ts uint64, also ...storage.Mutation) error {
	notify := storage.SetCell(FamilyNotify, column, ts, encodeNotify(uint64(n.now().UnixMilli())))
	if !n.apart {
		return n.store.Mutate(ctx, row, append(also, notify)...)
	}
	if err := n.store.Mutate(ctx, n.row(row), notify); err != nil {
		return err
	}
	return n.store.Mutate(ctx, row, also...)
}

// idempotentBatch returns st's MutateRows for batches that are safe in
// any order: the variant without a nonce where st offers it; nil if st
// cannot batch.
func idempotentBatch(st storage.Store) func(context.Context, []storage.RowMutation) ([]error, error) {
	if b, ok := st.(storage.IdempotentBatcher); ok {
		return b.MutateRowsIdempotent
	}
	if b, ok := st.(storage.Batcher); ok {
		return b.MutateRows
	}
	return nil
}

// Delete deletes the notification versions seen of column on row,
// whatever the data row holds (a column no observer watches any more).
// Safe in any order: it deletes exact versions, which no later write
// re-creates but a late copy of the same notification.
func (n NotifySpace) Delete(ctx context.Context, row []byte, column string, seen []uint64) error {
	return n.store.Mutate(ctx, n.row(row), deleteVersions(column, seen)...)
}

func deleteVersions(column string, seen []uint64) []storage.Mutation {
	dels := make([]storage.Mutation, len(seen))
	for i, ts := range seen {
		dels[i] = storage.DeleteCell(FamilyNotify, column, ts)
	}
	return dels
}

// Clear deletes the notification versions seen of column on row, unless
// a write of the column is locked or committed at or after minStart (a
// change the observers' runs, the oldest begun at minStart, may not have
// seen); it reports whether it cleared them. Clearing never erases a
// newer notification (each is its own version) nor hides a newer write
// (observer invariant 4). durable makes the clear wait for its sync
// (after a quarantine, so that a crash cannot bring back a notification
// that is also listed as quarantined).
//
// Where notifications live apart, the check and the delete are two
// calls, and a notification may be ahead of its prewrite (ahead: the
// versions seen that were written so). The check then also fences every
// such prewrite that has not landed: it leaves a rollback record at the
// version's start_ts, in the same conditional write, where the data row
// holds no lock of the column and no write record at or after that
// start_ts — so a late prewrite of it finds the record and fails
// (invariant 5), and cannot commit a write whose notification this clear
// deletes. A prewrite that did land shows as a lock or a write record
// and needs no fence. (A lock or write that appears after the check
// belongs to a transaction whose notification is not among those seen,
// or is fenced; the delete leaves the others.)
func (n NotifySpace) Clear(ctx context.Context, row []byte, column string, seen, ahead []uint64, minStart uint64, durable bool) (bool, error) {
	pred := storage.Filter{
		{Family: FamilyLock, Qualifier: column, Limit: 1},
		{Family: FamilyWrite, Qualifier: column, Time: storage.From(minStart), Limit: 1},
	}
	if n.apart {
		return n.clearApart(ctx, row, column, pred, seen, ahead, minStart)
	}
	// The delete need not be durable on return: lost in a crash, it leaves
	// a notification whose run finds the cell clean (the ack is durable)
	// and clears it again. So it rides on the next durable write.
	// A nonce over a server; Bigtable never re-sends it. Safe in any
	// order anyway: it deletes only the versions seen, which no later
	// write re-creates but a late copy of the same notification.
	cam := n.store.CheckAndMutate
	if d, ok := n.store.(storage.Deferred); ok && !durable {
		cam = d.CheckAndMutateDeferred
	}
	matched, err := cam(ctx, row, pred, nil, deleteVersions(column, seen))
	return err == nil && !matched, err
}

// clearApart is Clear where notifications live in rows of their own:
// fence the unlanded prewrites of the versions ahead and check, on the
// data row; then delete, on the notify row.
func (n NotifySpace) clearApart(ctx context.Context, row []byte, column string, pred storage.Filter, seen, ahead []uint64, minStart uint64) (bool, error) {
	var fences []storage.Mutation
	if len(ahead) > 0 {
		var ok bool
		var err error
		if fences, ok, err = n.fences(ctx, row, column, ahead); err != nil || !ok {
			return false, err
		}
		low := minStart
		for _, f := range fences {
			low = min(low, f.TS)
		}
		pred[1].Time = storage.From(low)
	}
	// A nonce over a server. Safe in any order anyway: a fence lands only
	// where its prewrite has neither landed nor been decided.
	matched, err := n.store.CheckAndMutate(ctx, row, pred, nil, fences)
	if err != nil || matched {
		return false, err
	}
	// Exact versions: safe in any order, as Clear's.
	if err := n.Delete(ctx, row, column, seen); err != nil {
		return false, err
	}
	return true, nil
}

// fences returns the rollback records that fence off the prewrites of
// the versions ahead that have not landed: those with no write record of
// column at or after their start_ts. ok is false when a lock of column
// exists (a prewrite in flight: clear after it).
func (n NotifySpace) fences(ctx context.Context, row []byte, column string, ahead []uint64) ([]storage.Mutation, bool, error) {
	r, err := n.store.ReadRow(ctx, row, storage.Filter{
		{Family: FamilyLock, Qualifier: column, Limit: 1},
		{Family: FamilyWrite, Qualifier: column, Time: storage.From(slices.Min(ahead))},
	})
	if err != nil {
		return nil, false, err
	}
	var newest uint64 // of the write records at or after the oldest ahead
	for _, c := range r.Cells {
		if c.Family == FamilyLock {
			return nil, false, nil
		}
		newest = max(newest, c.TS)
	}
	var fences []storage.Mutation
	for _, ts := range ahead {
		if newest < ts { // nothing at or after ts: the prewrite may come
			fences = append(fences, storage.SetCell(FamilyWrite, column, ts, encodeWrite(&Write{Op: OpRollback, StartTS: ts})))
		}
	}
	if mutant.On(mutant.SkipRollback) {
		return nil, true, nil // breaks invariant 5: a late prewrite lands unannounced
	}
	return fences, true, nil
}

// Compact compacts the notify keyspace on a store that keeps deletion
// markers (storage.Compacter), so that cleared notifications stop
// costing scans; ok is false on a store that does not.
func (n NotifySpace) Compact(ctx context.Context) (ok bool, err error) {
	c, ok := n.store.(storage.Compacter)
	if !ok {
		return false, nil
	}
	return true, c.CompactFamily(ctx, FamilyNotify)
}

// Compactable reports whether Compact does anything on this store.
func (n NotifySpace) Compactable() bool {
	_, ok := n.store.(storage.Compacter)
	return ok
}

// encodeNotify is a notification's value: the wall time it was set, in
// Unix milliseconds.
func encodeNotify(wallMS uint64) []byte { return binary.BigEndian.AppendUint64(nil, wallMS) }

// encodeNotifyAhead is the value of a notification written ahead of its
// prewrite: its clear must fence the prewrite off if it has not landed.
func encodeNotifyAhead(wallMS uint64) []byte { return append(encodeNotify(wallMS), 1) }

// notifyAhead reports whether a notification value was written ahead of
// its prewrite.
func notifyAhead(v []byte) bool { return len(v) == 9 && v[8] == 1 }

// decodeNotify returns the wall time of a notification value (0 if the
// value is not one).
func decodeNotify(v []byte) uint64 {
	if len(v) != 8 && !notifyAhead(v) {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
