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
// bottom level (sstables never span two families: familySpans), where
// tombstones are dropped. Pebble moves a table down without rewriting it
// when nothing below overlaps it, so its tombstones survive the move: into
// a level above the bottom (a store past LBaseMaxBytes), CompactFamily
// compacts again, pushing it further down; into the bottom level, pebble
// rewrites it in an elision-only compaction once its stats are loaded
// (when tombstones are at least a tenth of its entries), and CompactFamily
// waits for that. It does not wait for tables flushed after it began
// (level 0), and fails with an error if tombstones are left after
// elisionWait.
func (s *Store) CompactFamily(ctx context.Context, family string) error {
	if err := storage.ValidateFamily(family); err != nil {
		return err
	}
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	start, end := appendFamilyStart(nil, family), appendFamilyEnd(nil, family)
	deadline := time.Now().Add(elisionWait)
	wait := time.Millisecond
	for push := true; ; {
		if push {
			if err := s.db.Compact(ctx, start, end, false); err != nil {
				return fmt.Errorf("pebble: compacting %q: %w", family, err)
			}
		}
		above, bottom, err := s.tombstoneTables(start, end)
		switch {
		case err != nil:
			return fmt.Errorf("pebble: compacting %q: %w", family, err)
		case !above && !bottom:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("pebble: compacting %q: tombstones left after %s", family, elisionWait)
		}
		if push = above; push {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// tombstoneTables reports tables of [start, end) whose tombstones may be
// at least a tenth of their entries (or whose stats are not loaded yet):
// above, in a level between 0 and the bottom; bottom, in the bottom level.
func (s *Store) tombstoneTables(start, end []byte) (above, bottom bool, err error) {
	levels, err := s.db.SSTables(pebble.WithKeyRangeFilter(start, end))
	if err != nil {
		return false, false, err
	}
	for l := 1; l < len(levels); l++ {
		for _, t := range levels[l] {
			if st := t.TableStats; st.NumEntries == 0 || st.NumDeletions*10 > st.NumEntries {
				if l == len(levels)-1 {
					bottom = true
				} else {
					above = true
				}
			}
		}
	}
	return above, bottom, nil
}
