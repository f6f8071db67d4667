package remote

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

var (
	_ storage.Epoched     = (*Store)(nil)
	_ storage.MultiReader = (*Store)(nil)
)

// ReadRows implements storage.MultiReader: one ReadRows call.
func (s *Store) ReadRows(ctx context.Context, reads []storage.RowRead) ([]storage.Row, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	req, err := readsRequest(ctx, reads)
	if err != nil || len(reads) == 0 {
		return nil, err
	}
	var resp *rpcpb.ReadRowsResponse
	err = s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.ReadRows(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return readsReply("ReadRows", reads, resp.Rows)
}

// ReadRowsFresh implements storage.FreshReader: one call, a read (safe
// to send again: a copy takes a timestamp of its own, and the reply's
// is the one its rows were read below). storage.ErrNoOnePhase from a
// server older than the call.
func (s *Store) ReadRowsFresh(ctx context.Context, reads []storage.RowRead) (uint64, []storage.Row, error) {
	if err := s.check(); err != nil {
		return 0, nil, err
	}
	req, err := readsRequest(ctx, reads)
	if err != nil {
		return 0, nil, err
	}
	if len(reads) == 0 {
		return 0, nil, fmt.Errorf("%w: a fresh read of no rows", storage.ErrInvalidArgument)
	}
	for i := range reads {
		if len(reads[i].Filter) == 0 {
			return 0, nil, fmt.Errorf("%w: read %d: a fresh read names its selectors", storage.ErrInvalidArgument, i)
		}
	}
	var resp *rpcpb.ReadRowsFreshResponse
	err = s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.ReadRowsFresh(ctx, req)
		return err
	})
	if errors.Is(err, rpc.ErrUnimplemented) {
		return 0, nil, fmt.Errorf("%w: %w", storage.ErrNoOnePhase, err) // an older server
	}
	if err != nil {
		return 0, nil, err
	}
	if resp.Ts == 0 {
		return 0, nil, fmt.Errorf("remote: ReadRowsFresh answered without a timestamp")
	}
	rows, err := readsReply("ReadRowsFresh", reads, resp.Rows)
	return resp.Ts, rows, err
}

// readsRequest checks reads and builds their request.
func readsRequest(ctx context.Context, reads []storage.RowRead) (*rpcpb.ReadRowsRequest, error) {
	req := &rpcpb.ReadRowsRequest{Reads: make([]*rpcpb.ReadRowRequest, len(reads))}
	for i := range reads {
		if err := storage.CheckRead(ctx, reads[i].Row, reads[i].Filter); err != nil {
			return nil, fmt.Errorf("read %d: %w", i, err)
		}
		req.Reads[i] = &rpcpb.ReadRowRequest{Row: reads[i].Row, Filter: rpc.FilterToPB(reads[i].Filter)}
	}
	return req, nil
}

// readsReply converts the rows of a reply to reads.
func readsReply(method string, reads []storage.RowRead, pbs []*rpcpb.ReadRowResponse) ([]storage.Row, error) {
	if len(pbs) != len(reads) {
		return nil, fmt.Errorf("remote: %s answered %d rows for %d reads", method, len(pbs), len(reads))
	}
	rows := make([]storage.Row, len(reads))
	for i := range reads {
		rows[i] = storage.Row{Key: reads[i].Row, Cells: rpc.CellsFromPB(pbs[i].GetCells())}
	}
	return rows, nil
}

func rowCheckToPB(c *storage.RowCheck) *rpcpb.RowCheck {
	return &rpcpb.RowCheck{Row: c.Row, Predicate: rpc.FilterToPB(c.Predicate), Unless: rpc.FilterToPB(c.Unless),
		IfTrue: rpc.MutationsToPB(c.IfTrue), IfFalse: rpc.MutationsToPB(c.IfFalse)}
}

// CheckAndMutateRowsDeferred implements storage.Epoched: one call, without
// a nonce. The caller sends only checks safe to apply twice in any order
// (storage.Idempotent): a re-sent copy may apply again, late.
func (s *Store) CheckAndMutateRowsDeferred(ctx context.Context, checks []storage.RowCheck) ([]bool, uint64, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	if err := storage.CheckRowChecks(ctx, checks, nil); err != nil {
		return nil, 0, err
	}
	if len(checks) == 0 {
		return nil, 0, nil
	}
	req := &rpcpb.CheckAndMutateRowsRequest{Checks: make([]*rpcpb.RowCheck, len(checks))}
	for i := range checks {
		req.Checks[i] = rowCheckToPB(&checks[i])
	}
	var resp *rpcpb.CheckAndMutateRowsResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.CheckAndMutateRows(ctx, req)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Matched) != len(checks) || resp.Epoch == 0 {
		return nil, 0, fmt.Errorf("remote: CheckAndMutateRows answered %d branches for %d checks, epoch %d", len(resp.Matched), len(checks), resp.Epoch)
	}
	return resp.Matched, resp.Epoch, nil
}

// CheckAndMutateInEpoch implements storage.Epoched: one call, without a
// nonce, as above. storage.ErrEpochChanged when the server has restarted
// since epoch (if an earlier attempt of the call had reached the server
// before, it may have applied: the caller learns the outcome from what it
// wrote).
func (s *Store) CheckAndMutateInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then []storage.RowMutation) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if err := storage.CheckRowChecks(ctx, []storage.RowCheck{check}, then); err != nil {
		return false, err
	}
	req := &rpcpb.CheckAndMutateInEpochRequest{Epoch: epoch, Check: rowCheckToPB(&check), Then: rowMutationsToPB(then)}
	var resp *rpcpb.CheckAndMutateInEpochResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.CheckAndMutateInEpoch(ctx, req)
		return err
	})
	if err != nil {
		return false, err
	}
	return resp.Matched, nil
}

// CommitInEpoch implements storage.EpochStamper: one call, without a
// nonce, as CheckAndMutateInEpoch (a copy finds the primary's lock gone
// and applies nothing; the caller learns from the primary what an
// earlier copy did). storage.ErrNoOnePhase from a server older than the
// call.
func (s *Store) CommitInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then, stamped []storage.RowMutation, observers *uint64) (uint64, bool, error) {
	if err := s.check(); err != nil {
		return 0, false, err
	}
	if err := storage.CheckRowChecks(ctx, []storage.RowCheck{check}, then); err != nil {
		return 0, false, err
	}
	if err := storage.CheckStamped(check, then, stamped); err != nil {
		return 0, false, err
	}
	req := &rpcpb.CommitInEpochRequest{Epoch: epoch, Check: rowCheckToPB(&check),
		Then: rowMutationsToPB(then), Stamped: rowMutationsToPB(stamped), ObserversVersion: observers}
	var resp *rpcpb.CommitInEpochResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.CommitInEpoch(ctx, req)
		return err
	})
	if errors.Is(err, rpc.ErrUnimplemented) {
		return 0, false, fmt.Errorf("%w: %w", storage.ErrNoOnePhase, err) // an older server
	}
	if err != nil {
		return 0, false, err
	}
	return resp.CommitTs, resp.Matched, nil
}

// rowMutationsToPB converts rows of mutations to their messages.
func rowMutationsToPB(rows []storage.RowMutation) []*rpcpb.RowMutation {
	pbs := make([]*rpcpb.RowMutation, len(rows))
	for i := range rows {
		pbs[i] = &rpcpb.RowMutation{Row: rows[i].Row, Mutations: rpc.MutationsToPB(rows[i].Mutations)}
	}
	return pbs
}

// SyncedWrites returns how many writes the server's store has made
// durable since the server started (its Ping says it): for measuring what
// an operation costs in log syncs.
func (s *Store) SyncedWrites(ctx context.Context) (uint64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var resp *rpcpb.PingResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.Ping(ctx, &rpcpb.PingRequest{})
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.GetSyncedWrites(), nil
}

// CommitOnePhase implements storage.OnePhaser: one call, without a
// nonce (a copy finds the first one's commit records and applies
// nothing; the caller tells its own commit from another's by what it
// wrote). A conflict answered to a resend is reported as
// storage.ErrUnavailable: an earlier copy's outcome is unknown.
func (s *Store) CommitOnePhase(ctx context.Context, row []byte, predicate storage.Filter, mutations, stamped []storage.Mutation, observers *uint64) (uint64, bool, error) {
	if err := s.check(); err != nil {
		return 0, false, err
	}
	if err := storage.CheckRead(ctx, row, predicate); err != nil {
		return 0, false, err
	}
	if err := errors.Join(storage.ValidateMutations(mutations), storage.ValidateMutations(stamped)); err != nil {
		return 0, false, err
	}
	req := &rpcpb.CommitOnePhaseRequest{Row: row, Predicate: rpc.FilterToPB(predicate),
		Mutations: rpc.MutationsToPB(mutations), Stamped: rpc.MutationsToPB(stamped), ObserversVersion: observers}
	var (
		resp    *rpcpb.CommitOnePhaseResponse
		attempt int
	)
	err := s.conn.Do(ctx, func(ctx context.Context, a int) (err error) {
		attempt = a
		resp, err = s.conn.Storage.CommitOnePhase(ctx, req)
		return err
	})
	if errors.Is(err, rpc.ErrUnimplemented) {
		return 0, false, fmt.Errorf("%w: %w", storage.ErrNoOnePhase, err) // an older server: as PrewriteAsync
	}
	if err != nil {
		return 0, false, err
	}
	if resp.Conflict && attempt > 0 {
		// Refused after a resend: the first copy applied (its reply
		// lost, and the refusal is its own commit), or is delayed and
		// may still land once what refused this one is gone. The
		// caller cannot tell a conflict from either: the outcome is
		// unknown, and the caller settles it from the row (txn/doc.go,
		// "One-phase commit", retries).
		return 0, false, fmt.Errorf("%w: the one-phase commit was refused when sent again (attempt %d): an earlier copy may have applied, or may still", storage.ErrUnavailable, attempt+1)
	}
	if !resp.Conflict && resp.CommitTs == 0 {
		return 0, false, fmt.Errorf("remote: CommitOnePhase applied at timestamp 0")
	}
	return resp.CommitTs, resp.Conflict, nil
}

var _ storage.OnePhaser = (*Store)(nil)
var _ storage.EpochStamper = (*Store)(nil)
var _ storage.FreshReader = (*Store)(nil)

// PrewriteAsync implements storage.AsyncPrewriter: one call, without a
// nonce (a copy finds the first one's locks, which every predicate
// selects, and applies nothing; the caller learns from its rows what an
// earlier copy wrote).
func (s *Store) PrewriteAsync(ctx context.Context, checks []storage.AsyncCheck, observers *uint64) (uint64, []bool, error) {
	if err := s.check(); err != nil {
		return 0, nil, err
	}
	if err := storage.CheckAsyncChecks(ctx, checks); err != nil {
		return 0, nil, err
	}
	req := &rpcpb.PrewriteAsyncRequest{Checks: make([]*rpcpb.AsyncCheck, len(checks)), ObserversVersion: observers}
	for i := range checks {
		ch := &checks[i]
		req.Checks[i] = &rpcpb.AsyncCheck{Row: ch.Row, Predicate: rpc.FilterToPB(ch.Predicate),
			Mutations: rpc.MutationsToPB(ch.Mutations), Stamped: rpc.MutationsToPB(ch.Stamped)}
	}
	var resp *rpcpb.PrewriteAsyncResponse
	err := s.conn.Do(ctx, func(ctx context.Context, _ int) (err error) {
		resp, err = s.conn.Storage.PrewriteAsync(ctx, req)
		return err
	})
	if errors.Is(err, rpc.ErrUnimplemented) {
		// A server of an older build: it applied nothing, and its
		// clients commit in two phases.
		return 0, nil, fmt.Errorf("%w: %w", storage.ErrNoOnePhase, err)
	}
	if err != nil {
		return 0, nil, err
	}
	applied := slices.Contains(resp.Conflict, false)
	if len(resp.Conflict) != len(checks) || applied != (resp.Ts != 0) {
		return 0, nil, fmt.Errorf("remote: PrewriteAsync answered %d branches for %d checks at timestamp %d", len(resp.Conflict), len(checks), resp.Ts)
	}
	return resp.Ts, resp.Conflict, nil
}

var _ storage.AsyncPrewriter = (*Store)(nil)
