package bigtable

import (
	"context"
	"fmt"
	"time"

	bt "cloud.google.com/go/bigtable"

	"github.com/seed-992972ee/percolator/storage"
)

var _ storage.Clock = (*Store)(nil)

// The clock cell: a row and column no model cell can have (a model
// column is "family NUL qualifier" with a non-empty family).
const (
	clockRow = "\xff\xff\xffclock"
	clockCol = "\x00clock"
)

// Now implements storage.Clock: Bigtable's servers' time, read back from
// a cell written with the server's timestamp (bigtable.ServerTime): one
// MutateRow that replaces the cell, then one ReadRows of it. Millisecond
// resolution. Concurrent callers may read each other's cell: each still
// gets a server time taken between its call's start and its end.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := s.guard.enter(); err != nil {
		return time.Time{}, err
	}
	defer s.guard.exit()
	m := bt.NewMutation()
	m.DeleteCellsInColumn(Family, clockCol)
	m.Set(Family, clockCol, bt.ServerTime, nil)
	s.calls.Add(2)
	if err := s.table.Apply(ctx, clockRow, m); err != nil {
		return time.Time{}, s.wrap("Now", err)
	}
	r, err := s.table.ReadRow(ctx, clockRow, bt.RowFilter(bt.ChainFilters(bt.ColumnRangeFilter(Family, clockCol, clockCol+"\x00"), bt.LatestNFilter(1))))
	if err != nil {
		return time.Time{}, s.wrap("Now", err)
	}
	items := r[Family]
	if len(items) == 0 {
		return time.Time{}, fmt.Errorf("bigtable: the clock cell written at server time was not read back")
	}
	return items[0].Timestamp.Time(), nil
}
