package txn

import (
	"context"

	"github.com/seed-992972ee/percolator/storage"
)

// NewestTimestamp returns the highest timestamp the protocol's records in
// store carry (locks and rollback records at start_ts, commit records at
// commit_ts, notifications at the writer's start_ts), or 0 for a store
// without any. It reads every cell of those families' newest versions: an
// oracle that lost its mark resumes above it (oracle.StoreOptions.Recover).
func NewestTimestamp(ctx context.Context, store storage.Store) (uint64, error) {
	var newest uint64
	for _, fam := range []string{FamilyLock, FamilyWrite, FamilyNotify} {
		err := store.Scan(ctx, nil, nil, storage.Filter{{Family: fam, AllQualifiers: true, Limit: 1}}, 0, func(r storage.Row) bool {
			for i := range r.Cells {
				newest = max(newest, r.Cells[i].TS)
			}
			return true
		})
		if err != nil {
			return 0, err
		}
	}
	return newest, nil
}
