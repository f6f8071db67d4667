package storagetest

import (
	"context"

	"github.com/seed-992972ee/percolator/storage"
)

// MultiReadStore is a SharedStore that also reads several rows in one
// call (storage.MultiReader), as a server's store does: each read as
// ReadRow would, in turn. Tests run a client's batched reads (GetMany,
// the statuses of a scan's locks, a scan's rows past their skipped
// records) on it without a server.
type MultiReadStore struct{ SharedStore }

var _ storage.MultiReader = MultiReadStore{}

// ReadRows implements storage.MultiReader.
func (s MultiReadStore) ReadRows(ctx context.Context, reads []storage.RowRead) ([]storage.Row, error) {
	rows := make([]storage.Row, len(reads))
	for i := range reads {
		r, err := s.ReadRow(ctx, reads[i].Row, reads[i].Filter)
		if err != nil {
			return nil, err
		}
		rows[i] = r
	}
	return rows, nil
}
