package pebble

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-992972ee/percolator/storage"
)

// Record is one entry of the store's record keyspace: key-values outside
// the storage model, invisible to ReadRow and Scan, that a caller writes
// in the same atomic batch as a write's cells (the server's nonce table:
// a call's result is recorded in the write that applied it, so a crash
// keeps both or neither). Delete removes the key instead of setting it.
type Record struct {
	Key, Value []byte
	Delete     bool
}

// MaxRecordKey bounds a record's key.
const MaxRecordKey = 1024

// recordPrefix starts every record key: a metadata key (see keys.go).
var recordPrefix = []byte("\x00rec\x00")

func recordKey(k []byte) []byte {
	return append(append(make([]byte, 0, len(recordPrefix)+len(k)), recordPrefix...), k...)
}

func addRecords(b *pebble.Batch, recs []Record) error {
	for i := range recs {
		r := &recs[i]
		if len(r.Key) == 0 || len(r.Key) > MaxRecordKey {
			return fmt.Errorf("%w: record key of %d bytes", storage.ErrInvalidArgument, len(r.Key))
		}
		var err error
		if r.Delete {
			err = b.Delete(recordKey(r.Key), nil)
		} else {
			err = b.Set(recordKey(r.Key), r.Value, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckAndMutateRecorded is CheckAndMutateUnless (CheckAndMutate when
// unless is empty) that also writes rec(matched) in the same atomic,
// durable batch as the branch, even when the branch is empty. rec runs
// under the row latch.
func (s *Store) CheckAndMutateRecorded(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation, rec func(matched bool) []Record) (bool, error) {
	return s.checkAndMutate(ctx, row, nil, predicate, unless, ifTrue, ifFalse, pebble.Sync, rec)
}

// IncrementRecorded is Increment that also writes rec(sum) in the same
// atomic, durable batch. rec runs under the row latch.
func (s *Store) IncrementRecorded(ctx context.Context, row []byte, family, qualifier string, delta int64, rec func(sum int64) []Record) (int64, error) {
	return s.increment(ctx, row, family, qualifier, delta, rec)
}

// MutateRecorded is Mutate that also writes recs in the same atomic,
// durable batch.
func (s *Store) MutateRecorded(ctx context.Context, row []byte, mutations []storage.Mutation, recs []Record) error {
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return err
	}
	if err := storage.CheckWrite(ctx, row, mutations); err != nil {
		return err
	}
	h, err := s.latches.lockRow(ctx, row, true)
	if err != nil {
		return err
	}
	defer h.release()
	if err := s.latched(ctx); err != nil {
		return err
	}
	return s.commitLocked(h, []storage.RowMutation{{Row: row, Mutations: mutations}}, pebble.Sync, recs)
}

// MutateRowsRecorded is MutateRows that also writes recs in the same
// atomic, durable batch as the rows (which MutateRows commits as one
// batch anyway).
func (s *Store) MutateRowsRecorded(ctx context.Context, rows []storage.RowMutation, recs []Record) error {
	_, err := s.mutateRows(ctx, rows, pebble.Sync, recs)
	return err
}

// WriteRecords writes recs alone in one atomic batch, durably when durable
// is set (else a later durable write covers it, as Deferred).
func (s *Store) WriteRecords(ctx context.Context, recs []Record, durable bool) error {
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	if err := s.space.admit(ctx); err != nil {
		return err
	}
	if err := s.latched(ctx); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := addRecords(b, recs); err != nil {
		return err
	}
	sync := pebble.NoSync
	if durable {
		sync = pebble.Sync
	}
	if err := commitRecovering(b, sync); err != nil {
		s.guard.fail(err)
		return s.guard.failure()
	}
	return nil
}

// ScanRecords calls fn with each record whose key starts with prefix, in
// key order, until fn returns false. The slices are valid during the call
// only.
func (s *Store) ScanRecords(ctx context.Context, prefix []byte, fn func(key, value []byte) bool) error {
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	lower := recordKey(prefix)
	upper := bytesAfter(lower)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key()[len(recordPrefix):], it.Value()) {
			break
		}
	}
	return it.Error()
}

// bytesAfter returns the smallest key above every key with prefix p, or
// nil if there is none.
func bytesAfter(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
