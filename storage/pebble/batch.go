package pebble

import (
	"bytes"
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// batchWriter turns mutations into batch operations. Deletes become point
// deletes of the versions that exist (found through the batch when it is
// indexed, else through the db, which the row latch keeps still): range
// tombstones were rejected because every iterator over a memtable holding
// them re-fragments them, which slows the reads of a busy store.
type batchWriter struct {
	s           *Store
	b           *pebble.Batch
	key         []byte
	newFamilies []string
}

func (w *batchWriter) init(s *Store, b *pebble.Batch) { w.s, w.b = s, b }

func (w *batchWriter) add(row []byte, ms []storage.Mutation) error {
	for i := range ms {
		if err := w.addOne(row, &ms[i]); err != nil {
			return err
		}
	}
	return nil
}

func (w *batchWriter) addOne(row []byte, m *storage.Mutation) error {
	switch m.Kind {
	case storage.Put:
		w.noteFamily(m.Family)
		w.key = appendKey(w.key[:0], m.Family, row, m.Qualifier, m.TS)
		return w.b.Set(w.key, m.Value, nil)
	case storage.DeleteCells:
		return w.deleteCells(row, m)
	case storage.DeleteRow:
		for f := range w.s.families.list() {
			prefix := appendRowPrefix(nil, f, row)
			if err := w.deleteSpan(prefix, storage.AppendPrefixEnd(nil, prefix)); err != nil {
				return err
			}
		}
		for _, f := range w.newFamilies {
			prefix := appendRowPrefix(nil, f, row)
			if err := w.deleteSpan(prefix, storage.AppendPrefixEnd(nil, prefix)); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteFamily persists a family's registry key with the first cell written
// to it. The family joins the in-memory registry once the batch commits.
func (w *batchWriter) noteFamily(family string) {
	if w.s.families.has(family) {
		return
	}
	for _, f := range w.newFamilies {
		if f == family {
			return
		}
	}
	w.newFamilies = append(w.newFamilies, family)
	_ = w.b.Set(familyMetaKey(family), nil, nil)
}

func (w *batchWriter) deleteCells(row []byte, m *storage.Mutation) error {
	col := appendColumnPrefix(nil, m.Family, row, m.Qualifier)
	if exactRange(m.Time) {
		return w.b.Delete(appendTS(col, m.Time.Start), nil)
	}
	if m.Time.End != 0 && m.Time.End <= m.Time.Start {
		return nil // empty range
	}
	lo := col
	if m.Time.End != 0 {
		lo = appendTS(bytes.Clone(col), m.Time.End-1)
	}
	hi := append(appendTS(bytes.Clone(col), m.Time.Start), 0x00) // just past ts Start
	return w.deleteSpan(lo, hi)
}

// deleteSpan point-deletes every key in [lo, hi).
func (w *batchWriter) deleteSpan(lo, hi []byte) error {
	var src interface {
		NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
	} = w.s.db
	if w.b.Indexed() {
		src = w.b
	}
	it, err := src.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var keys [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
	}
	if err := it.Close(); err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		errs = append(errs, w.b.Delete(k, nil))
	}
	return errors.Join(errs...)
}
