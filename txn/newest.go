package txn

import (
	"context"

	"github.com/seed-992972ee/percolator/storage"
)

// NewestTimestamp returns the highest timestamp the protocol's records in
// store carry (locks and rollback records at start_ts, commit records at
// commit_ts, notifications at the writer's start_ts, and the stamp inside
// each async-commit lock, its transaction's commit_ts until its commit
// records are written), or 0 for a store without any. It reads every
// lock, and every cell of the other families' newest versions: an oracle
// that lost its mark resumes above it (oracle.StoreOptions.Recover).
func NewestTimestamp(ctx context.Context, store storage.Store) (uint64, error) {
	var newest uint64
	for _, fam := range []string{FamilyLock, FamilyWrite, FamilyNotify} {
		sel := storage.Selector{Family: fam, AllQualifiers: true, Limit: 1}
		if fam == FamilyLock {
			sel.Limit = 0 // each lock may carry a stamp above its version
		}
		err := store.Scan(ctx, nil, nil, storage.Filter{sel}, 0, func(r storage.Row) bool {
			for i := range r.Cells {
				newest = max(newest, r.Cells[i].TS)
				if fam == FamilyLock {
					// A lock this build cannot read carries no stamp it
					// knows of: its version is what counts.
					if l, err := decodeLock(r.Cells[i].Value); err == nil && l.Async {
						newest = max(newest, l.MinCommitTS)
					}
				}
			}
			return true
		})
		if err != nil {
			return 0, err
		}
	}
	return newest, nil
}
