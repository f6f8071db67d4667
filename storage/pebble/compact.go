package pebble

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// elisionWait bounds how long CompactFamily waits for pebble to drop the
// tombstones its compaction left in the bottom level.
const elisionWait = 2 * time.Second

// CompactFamily implements storage.Compacter. It flushes the memtable if
// it holds keys of family and compacts family's keyspace down to the
// bottom level (keys of other families sharing an sstable are rewritten
// too, unchanged). Tombstones are dropped there, except in a file pebble
// merely moved down because nothing overlapped it: pebble rewrites such a
// file in an elision-only compaction once its table stats are loaded
// (when tombstones are at least a tenth of its entries), so CompactFamily
// then waits, up to elisionWait, until a scan of the family visits no
// more than about a tenth more points than it finds live keys.
func (s *Store) CompactFamily(ctx context.Context, family string) error {
	if err := storage.ValidateFamily(family); err != nil {
		return err
	}
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	start, end := appendFamilyStart(nil, family), appendFamilyEnd(nil, family)
	if err := s.db.Compact(ctx, start, end, false); err != nil {
		return fmt.Errorf("pebble: compacting %q: %w", family, err)
	}
	deadline := time.Now().Add(elisionWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		points, live, err := s.countRange(start, end)
		if err != nil {
			return fmt.Errorf("pebble: compacting %q: %w", family, err)
		}
		if points <= live+live/10+16 || time.Now().After(deadline) {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// countRange returns the internal points an iteration of [start, end)
// visits and the live keys it yields.
func (s *Store) countRange(start, end []byte) (points, live uint64, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return 0, 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		live++
	}
	points = it.Stats().InternalStats.PointCount
	return points, live, errors.Join(it.Error(), it.Close())
}
