package pebble

import (
	"context"
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
// bottom level (sstables never span two families: familySpans). Tombstones
// are dropped there, except in a table pebble merely moved down because
// nothing overlapped it: pebble rewrites such a table in an elision-only
// compaction once its stats are loaded, when tombstones are at least a
// tenth of its entries. CompactFamily waits for that, up to elisionWait;
// it does not wait for tombstones written after it began.
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
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		pending, err := s.elisionPending(start, end)
		if err != nil {
			return fmt.Errorf("pebble: compacting %q: %w", family, err)
		}
		if !pending || time.Now().After(deadline) {
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

// elisionPending reports whether a bottom-level table of [start, end) has
// no stats yet or qualifies for pebble's elision-only compaction.
func (s *Store) elisionPending(start, end []byte) (bool, error) {
	levels, err := s.db.SSTables(pebble.WithKeyRangeFilter(start, end))
	if err != nil || len(levels) == 0 {
		return false, err
	}
	for _, t := range levels[len(levels)-1] {
		if st := t.TableStats; st.NumEntries == 0 || st.NumDeletions*10 > st.NumEntries {
			return true, nil
		}
	}
	return false, nil
}
