package observer

import (
	"bytes"
	"context"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// The notify keyspace: FamilyNotify in the data rows, or, on a store whose
// families share rows (txn.SeparateNotify), the rows under
// txn.NotifyRowPrefix, one per data row. Everything above this file works
// in data-row keys: notifyRow maps a key to where its notifications live,
// and the scans below map ranges in and keys back out.

// notifyRow is where row's notifications live.
func (f *Framework) notifyRow(row []byte) []byte {
	if f.sepNotify {
		return txn.NotifyRow(row)
	}
	return row
}

// notifyRange maps the data-row range [start, end) (nil: unbounded) to
// the store's notify keyspace.
func (f *Framework) notifyRange(start, end []byte) ([]byte, []byte) {
	if !f.sepNotify {
		return start, end
	}
	s := txn.NotifyRow(start)
	if end == nil {
		return s, storage.PrefixEnd([]byte(txn.NotifyRowPrefix))
	}
	return s, txn.NotifyRow(end)
}

// scanNotifyRange reads the notifications of the data rows in [start,
// end), up to limit rows (0: all), and returns the keys the store visited
// finding them (0 on a store that does not count). fn gets data-row keys.
func (f *Framework) scanNotifyRange(ctx context.Context, start, end []byte, limit int, fn func(storage.Row) bool) (uint64, error) {
	s, e := f.notifyRange(start, end)
	each := fn
	if f.sepNotify {
		each = func(r storage.Row) bool {
			if !bytes.HasPrefix(r.Key, []byte(txn.NotifyRowPrefix)) {
				return true // a user row that sorts among them: not ours
			}
			r.Key = r.Key[len(txn.NotifyRowPrefix):]
			return fn(r)
		}
	}
	if c, ok := f.store.(storage.Counted); ok {
		return c.ScanCounted(ctx, s, e, notifyAll, limit, each)
	}
	return 0, f.store.Scan(ctx, s, e, notifyAll, limit, each)
}
