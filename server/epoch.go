package server

import (
	"context"
	"fmt"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// epochRow is the server's reserved row holding its run counter, the
// epoch (storage.Epoched): raised by one, durably, at every Open, before
// anything is served.
var epochRow = storage.ReservedRow("server/epoch")

// The epoch's column in epochRow.
const epochFamily, epochQualifier = "epoch", "n"

// nextEpoch raises the stored epoch and returns it: the run this process
// serves. Every write it acknowledges before its log sync belongs to it,
// and a restart, which may lose such writes, starts another.
func nextEpoch(ctx context.Context, st *pebble.Store) (uint64, error) {
	n, err := st.Increment(ctx, epochRow, epochFamily, epochQualifier, 1)
	if err != nil {
		return 0, fmt.Errorf("server: raising the epoch: %w", err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("server: epoch %d in %s is not positive", n, storage.QuoteRow(epochRow))
	}
	return uint64(n), nil
}
