package bigtable

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	bt "cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/storage"
)

// ReadRow implements storage.Store: one ReadRows call.
func (s *Store) ReadRow(ctx context.Context, row []byte, filter storage.Filter) (storage.Row, error) {
	if err := storage.CheckRead(ctx, row, filter); err != nil {
		return storage.Row{}, err
	}
	if err := s.guard.enter(); err != nil {
		return storage.Row{}, err
	}
	defer s.guard.exit()
	key := append([]byte(nil), row...)
	if len(filter) == 0 {
		return storage.Row{Key: key}, nil
	}
	s.calls.Add(1)
	r, err := s.table.ReadRow(ctx, string(row), bt.RowFilter(toFilter(filter)))
	if err != nil {
		return storage.Row{}, s.wrap("ReadRow", err)
	}
	return fromRow(key, r)
}

// Scan implements storage.Store.
func (s *Store) Scan(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) error {
	_, err := s.ScanCounted(ctx, start, end, filter, limit, fn)
	return err
}

// ScanCounted implements storage.Counted: the keys visited are the cells
// Bigtable reports it saw (its full read stats), every family of every
// row in the range, selected or not — Bigtable has no locality groups.
func (s *Store) ScanCounted(ctx context.Context, start, end []byte, filter storage.Filter, limit int, fn func(storage.Row) bool) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := storage.CheckScan(start, end, filter, limit); err != nil {
		return 0, err
	}
	if err := s.guard.enter(); err != nil {
		return 0, err
	}
	defer s.guard.exit()
	if len(filter) == 0 {
		return 0, nil
	}
	var rr bt.RowRange
	if len(end) == 0 {
		rr = bt.InfiniteRange(string(start))
	} else {
		rr = bt.NewRange(string(start), string(end))
	}
	var seen uint64
	opts := []bt.ReadOption{bt.RowFilter(toFilter(filter)), bt.WithFullReadStats(func(st *bt.FullReadStats) {
		seen += uint64(st.ReadIterationStats.CellsSeenCount)
	})}
	if limit > 0 {
		opts = append(opts, bt.LimitRows(int64(limit)))
	}
	var ferr error
	s.calls.Add(1)
	err := s.table.ReadRows(ctx, rr, func(r bt.Row) bool {
		row, err := fromRow([]byte(r.Key()), r)
		if err != nil {
			ferr = err
			return false
		}
		if len(row.Cells) == 0 {
			return true
		}
		return fn(row)
	}, opts...)
	if ferr != nil {
		return seen, ferr
	}
	if err != nil {
		return seen, s.wrap("Scan", err)
	}
	return seen, nil
}

// Mutate implements storage.Store: one MutateRow call. The client
// re-sends it on a retryable error: a Put at an explicit time and a
// delete are idempotent, though not safe in any order (doc.go, Retries).
func (s *Store) Mutate(ctx context.Context, row []byte, mutations ...storage.Mutation) error {
	if err := s.checkWrite(ctx, row, mutations); err != nil {
		return err
	}
	if err := s.guard.enter(); err != nil {
		return err
	}
	defer s.guard.exit()
	m, n := toMutation(mutations)
	if n == 0 {
		return nil
	}
	s.calls.Add(1)
	return s.wrap("Mutate", s.table.Apply(ctx, string(row), m))
}

func (s *Store) checkWrite(ctx context.Context, row []byte, ms []storage.Mutation) error {
	if err := storage.CheckWrite(ctx, row, ms); err != nil {
		return err
	}
	return checkTimestamps(ms)
}

// CheckAndMutate implements storage.Store: one CheckAndMutateRow call,
// never re-sent (its outcome is unknown after a failure).
func (s *Store) CheckAndMutate(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := s.checkCAS(ctx, row, predicate, ifTrue, ifFalse); err != nil {
		return false, err
	}
	if err := s.guard.enter(); err != nil {
		return false, err
	}
	defer s.guard.exit()
	return s.cas(ctx, row, toFilter(predicate), ifTrue, ifFalse)
}

// CheckAndMutateUnless implements storage.Unlessed: one CheckAndMutateRow
// whose condition is ConditionFilter(unless, BlockAll, predicate): where
// unless selects a cell the condition selects none (the false branch),
// elsewhere it is predicate. Never re-sent, as CheckAndMutate.
func (s *Store) CheckAndMutateUnless(ctx context.Context, row []byte, predicate, unless storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := s.checkCAS(ctx, row, predicate, ifTrue, ifFalse); err != nil {
		return false, err
	}
	if err := storage.ValidateFilter(unless); err != nil {
		return false, err
	}
	if err := s.guard.enter(); err != nil {
		return false, err
	}
	defer s.guard.exit()
	return s.cas(ctx, row, unlessFilter(predicate, unless), ifTrue, ifFalse)
}

// unlessFilter is the condition of CheckAndMutateUnless.
func unlessFilter(predicate, unless storage.Filter) bt.Filter {
	if len(unless) == 0 {
		return toFilter(predicate)
	}
	return bt.ConditionFilter(toFilter(unless), bt.BlockAllFilter(), toFilter(predicate))
}

// CheckAndMutateIdempotent implements storage.Idempotent: the caller
// vouches that the call is safe to apply twice (the protocol's
// prewrites, commits and rollbacks), so a retryable failure — which may
// have been applied — is re-sent, with jittered back-off, up to
// Options.CASRetries times.
func (s *Store) CheckAndMutateIdempotent(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if err := s.checkCAS(ctx, row, predicate, ifTrue, ifFalse); err != nil {
		return false, err
	}
	if err := s.guard.enter(); err != nil {
		return false, err
	}
	defer s.guard.exit()
	pred := toFilter(predicate)
	backoff := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		matched, err := s.cas(ctx, row, pred, ifTrue, ifFalse)
		if err == nil || attempt >= s.opts.CASRetries || !retryable(err) {
			return matched, err
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(backoff/2 + rand.N(backoff)):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (s *Store) checkCAS(ctx context.Context, row []byte, predicate storage.Filter, ifTrue, ifFalse []storage.Mutation) error {
	if err := storage.CheckRead(ctx, row, predicate); err != nil {
		return err
	}
	if err := s.checkWrite(ctx, row, ifTrue); err != nil {
		return err
	}
	return s.checkWrite(ctx, row, ifFalse)
}

func (s *Store) cas(ctx context.Context, row []byte, pred bt.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	t, nt := toMutation(ifTrue)
	f, nf := toMutation(ifFalse)
	if nt+nf == 0 {
		// Nothing to write either way (Bigtable refuses a conditional
		// mutation of no operations): reading the predicate is the call.
		s.calls.Add(1)
		r, err := s.table.ReadRow(ctx, string(row), bt.RowFilter(bt.ChainFilters(pred, bt.CellsPerRowLimitFilter(1), bt.StripValueFilter())))
		if err != nil {
			return false, s.wrap("CheckAndMutate", err)
		}
		return len(r[Family]) > 0, nil
	}
	if nt == 0 {
		t = nil
	}
	if nf == 0 {
		f = nil
	}
	var matched bool
	s.calls.Add(1)
	err := s.table.Apply(ctx, string(row), bt.NewCondMutation(pred, t, f), bt.GetCondMutationResult(&matched))
	if err != nil {
		return false, s.wrap("CheckAndMutate", err)
	}
	return matched, nil
}

// MutateRows implements storage.Batcher: one MutateRows call, which the
// client re-sends for the rows that failed retryably.
func (s *Store) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range rows {
		if err := s.checkWrite(ctx, rows[i].Row, rows[i].Mutations); err != nil {
			return nil, err
		}
	}
	if err := s.guard.enter(); err != nil {
		return nil, err
	}
	defer s.guard.exit()
	keys := make([]string, 0, len(rows))
	muts := make([]*bt.Mutation, 0, len(rows))
	index := make([]int, 0, len(rows))
	for i := range rows {
		m, n := toMutation(rows[i].Mutations)
		if n == 0 {
			continue
		}
		keys = append(keys, string(rows[i].Row))
		muts = append(muts, m)
		index = append(index, i)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	s.calls.Add(1)
	errs, err := s.table.ApplyBulk(ctx, keys, muts)
	if err != nil {
		return nil, s.wrap("MutateRows", err)
	}
	if errs == nil {
		return nil, nil
	}
	out := make([]error, len(rows))
	for j, e := range errs {
		if e != nil {
			out[index[j]] = s.wrap("MutateRows", e)
		}
	}
	return out, nil
}

// Increment implements storage.Store as a compare-and-set loop on the
// exact old value: read the newest version, then one CheckAndMutateRow
// that replaces it only if it is still the newest. Bigtable's own
// ReadModifyWriteRow is not used: it writes at the server's time, not at
// timestamp 0, and a re-send after an unknown outcome adds twice (so does
// this loop: Increment is not idempotent on any backend).
func (s *Store) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if err := storage.CheckWrite(ctx, row, []storage.Mutation{storage.SetCell(family, qualifier, 0, nil)}); err != nil {
		return 0, err
	}
	if err := s.guard.enter(); err != nil {
		return 0, err
	}
	defer s.guard.exit()
	col := column(family, qualifier)
	newest := bt.ChainFilters(bt.ColumnRangeFilter(Family, col, col+"\x00"), bt.LatestNFilter(1))
	for {
		s.calls.Add(1)
		r, err := s.table.ReadRow(ctx, string(row), bt.RowFilter(newest))
		if err != nil {
			return 0, s.wrap("Increment", err)
		}
		var old int64
		var pred bt.Filter
		items := r[Family]
		if len(items) > 0 {
			v := items[0].Value
			if len(v) != 8 {
				return 0, fmt.Errorf("%w: increment of %s:%q holding %d bytes, not 8", storage.ErrInvalidArgument, family, qualifier, len(v))
			}
			old = int64(binary.BigEndian.Uint64(v))
			// Still the newest, at the same time, with the same value.
			ts := bt.Timestamp(items[0].Timestamp)
			pred = bt.ChainFilters(newest, bt.TimestampRangeFilterMicros(ts, ts+1000), bt.ValueRangeFilter(v, append(v[:8:8], 0)))
		}
		sum := old + delta
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(sum))
		m := bt.NewMutation()
		m.DeleteCellsInColumn(Family, col)
		m.Set(Family, col, 0, v[:])
		var cm *bt.Mutation
		if pred == nil {
			// Absent: apply only if still absent.
			cm = bt.NewCondMutation(bt.ColumnRangeFilter(Family, col, col+"\x00"), nil, m)
		} else {
			cm = bt.NewCondMutation(pred, m, nil)
		}
		var matched bool
		s.calls.Add(1)
		if err := s.table.Apply(ctx, string(row), cm, bt.GetCondMutationResult(&matched)); err != nil {
			return 0, s.wrap("Increment", err)
		}
		if matched == (pred != nil) {
			return sum, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
	}
}

// retryable reports whether a failed call may be re-sent: Bigtable
// answered with a transient code (the call may or may not have applied).
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Internal:
		return true
	}
	return false
}

// wrap names the call in err, keeping the context's errors and the gRPC
// status reachable.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
		return fmt.Errorf("bigtable: %s: %w: %v", op, storage.ErrInvalidArgument, err)
	}
	if retryable(err) {
		return fmt.Errorf("bigtable: %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	return fmt.Errorf("bigtable: %s: %w", op, err)
}

func isNotFound(err error) bool      { return status.Code(err) == codes.NotFound }
func isAlreadyExists(err error) bool { return status.Code(err) == codes.AlreadyExists }
