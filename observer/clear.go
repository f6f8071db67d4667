package observer

import "context"

// clear deletes the notification versions seen of (row, col) unless a
// write the runs begun at minStart may not have seen exists
// (txn.NotifySpace.Clear: never a newer notification, never hiding a
// newer write; on a store that keeps notifications apart it fences the
// prewrites of the versions ahead that have not landed).
func (f *Framework) clear(ctx context.Context, row []byte, col string, seen, ahead []uint64, minStart uint64, durable bool) (bool, error) {
	cleared, err := f.notify.Clear(ctx, row, col, seen, ahead, minStart, durable)
	if err != nil {
		return false, transient(err)
	}
	if cleared {
		f.clears.Add(int64(len(seen)))
	}
	return cleared, nil
}

// clearOrphans deletes the notification versions seen of a column that no
// observer watches any more (every process's registry says so after the
// refresh that followed the scan; a registration raised later backfills
// with a version of its own, which this delete leaves).
func (f *Framework) clearOrphans(ctx context.Context, row []byte, col string, seen []uint64) (did, left bool, err error) {
	if err := f.notify.Delete(ctx, row, col, seen); err != nil {
		return false, true, transient(err)
	}
	f.clears.Add(int64(len(seen)))
	return true, false, nil
}
