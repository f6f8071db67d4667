package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/internal/mutant"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
)

// The calls that carry several rows: reads of several rows in one round
// trip, and a transaction's prewrites and commit (storage.Epoched, doc.go
// "Epochs").

// ReadRows implements rpcpb.StorageServer: each read as ReadRow.
func (s *storageService) ReadRows(ctx context.Context, req *rpcpb.ReadRowsRequest) (*rpcpb.ReadRowsResponse, error) {
	if err := checkReads(req); err != nil {
		return nil, err
	}
	resp := &rpcpb.ReadRowsResponse{Rows: make([]*rpcpb.ReadRowResponse, len(req.Reads))}
	for i, r := range req.Reads {
		out, err := s.readRow(ctx, r) // checked above
		if err != nil {
			return nil, err
		}
		resp.Rows[i] = out
	}
	return resp, nil
}

// checkReads checks a ReadRows request.
func checkReads(req *rpcpb.ReadRowsRequest) error {
	if len(req.Reads) > MaxMutations {
		return status.Errorf(codes.InvalidArgument, "%d reads, at most %d", len(req.Reads), MaxMutations)
	}
	for i, r := range req.Reads {
		if r == nil {
			return status.Errorf(codes.InvalidArgument, "read %d is empty", i)
		}
		if err := firstError(checkRow(r.Row), checkFilter(r.Filter, fmt.Sprintf("read %d filter", i))); err != nil {
			return err
		}
	}
	return nil
}

// ReadRowsFresh implements rpcpb.StorageServer: a timestamp from this
// server's oracle, then the reads, each selector cut below it
// (storage.FreshReader). Each read waits, as ReadRows', for the commits
// in flight on its row (a one-phase or async commit's mark, a durable
// write's sync), all of them begun before it.
func (s *storageService) ReadRowsFresh(ctx context.Context, req *rpcpb.ReadRowsRequest) (*rpcpb.ReadRowsFreshResponse, error) {
	if err := checkReads(req); err != nil {
		return nil, err
	}
	for i, r := range req.Reads {
		if len(r.Filter) == 0 {
			// An empty filter reads every cell, of every version.
			return nil, status.Errorf(codes.InvalidArgument, "read %d: a fresh read names its selectors", i)
		}
	}
	ts, err := s.freshTimestamp(ctx)
	if err != nil {
		return nil, s.srv.status(err)
	}
	resp := &rpcpb.ReadRowsFreshResponse{Ts: ts, Rows: make([]*rpcpb.ReadRowResponse, len(req.Reads))}
	for i, r := range req.Reads {
		f := storage.CutBefore(rpc.FilterFromPB(r.Filter), ts)
		if len(f) == 0 && len(r.Filter) > 0 {
			resp.Rows[i] = &rpcpb.ReadRowResponse{} // nothing below ts selected
			continue
		}
		out, err := s.readRowFiltered(ctx, r.Row, f)
		if err != nil {
			return nil, err
		}
		resp.Rows[i] = out
	}
	return resp, nil
}

// freshTimestamp is a fresh read's timestamp: a new one from this
// server's oracle, handed out after the call arrived.
func (s *storageService) freshTimestamp(ctx context.Context) (uint64, error) {
	if mutant.On(mutant.FreshReadStale) {
		// Breaks invariant 1: a timestamp handed out before the call,
		// to an earlier one, reused 19 times in 20.
		if n := staleReads.Add(1); n%20 != 1 {
			if ts := staleTS.Load(); ts != 0 {
				return ts, nil
			}
		}
		ts, err := s.srv.alloc.Allocate(ctx, 1)
		staleTS.Store(ts)
		return ts, err
	}
	return s.srv.alloc.Allocate(ctx, 1)
}

// The fresh-read-stale mutant's state.
var staleReads, staleTS atomic.Uint64

// rowChecks converts and checks a request's row checks.
func rowChecks(pbs []*rpcpb.RowCheck) ([]storage.RowCheck, error) {
	if len(pbs) > MaxMutations {
		return nil, status.Errorf(codes.InvalidArgument, "%d checks, at most %d", len(pbs), MaxMutations)
	}
	checks := make([]storage.RowCheck, len(pbs))
	for i, c := range pbs {
		if c == nil {
			return nil, status.Errorf(codes.InvalidArgument, "check %d is empty", i)
		}
		what := fmt.Sprintf("check %d", i)
		if err := firstError(checkRow(c.Row), checkFilter(c.Predicate, what+" predicate"), checkFilter(c.Unless, what+" unless"),
			checkMutations(c.IfTrue, what+" if_true"), checkMutations(c.IfFalse, what+" if_false")); err != nil {
			return nil, err
		}
		checks[i] = storage.RowCheck{Row: c.Row, Predicate: rpc.FilterFromPB(c.Predicate), Unless: rpc.FilterFromPB(c.Unless),
			IfTrue: rpc.MutationsFromPB(c.IfTrue), IfFalse: rpc.MutationsFromPB(c.IfFalse)}
	}
	return checks, nil
}

// CheckAndMutateRows implements rpcpb.StorageServer: the checks under
// their rows' latches, applied in one batch without waiting for the log
// sync; the reply carries this run's epoch.
func (s *storageService) CheckAndMutateRows(ctx context.Context, req *rpcpb.CheckAndMutateRowsRequest) (*rpcpb.CheckAndMutateRowsResponse, error) {
	checks, err := rowChecks(req.Checks)
	if err != nil {
		return nil, err
	}
	matched, err := s.st().CheckAndMutateRows(ctx, checks, true)
	if err != nil {
		return nil, s.srv.status(err)
	}
	for i := range checks {
		s.srv.countBranch(checks[i].IfTrue, checks[i].IfFalse, matched[i])
	}
	return &rpcpb.CheckAndMutateRowsResponse{Matched: matched, Epoch: s.srv.epoch}, nil
}

// errEpochChanged refuses a CheckAndMutateInEpoch of another run.
var errEpochChanged = errors.New("the server restarted since")

// CheckAndMutateInEpoch implements rpcpb.StorageServer: the check, and
// then when it matched, in one durable batch, only in the epoch given. The
// epoch is compared under every row's latch: a write of this run
// acknowledged before it was applied before it, and this write's sync
// makes it durable too.
func (s *storageService) CheckAndMutateInEpoch(ctx context.Context, req *rpcpb.CheckAndMutateInEpochRequest) (*rpcpb.CheckAndMutateInEpochResponse, error) {
	check, then, err := epochCall(req.Check, req.Then)
	if err != nil {
		return nil, err
	}
	matched, err := s.st().CheckAndMutateThen(ctx, check, then, s.epochGuard(req.Epoch))
	if err != nil {
		return nil, s.srv.status(err)
	}
	s.srv.countBranch(check.IfTrue, check.IfFalse, matched)
	return &rpcpb.CheckAndMutateInEpochResponse{Matched: matched}, nil
}

// epochCall converts and checks a commit point's check and the rows
// after it.
func epochCall(pb *rpcpb.RowCheck, pbThen []*rpcpb.RowMutation) (storage.RowCheck, []storage.RowMutation, error) {
	if pb == nil {
		return storage.RowCheck{}, nil, status.Error(codes.InvalidArgument, "no check")
	}
	checks, err := rowChecks([]*rpcpb.RowCheck{pb})
	if err != nil {
		return storage.RowCheck{}, nil, err
	}
	if len(pbThen) > MaxMutations {
		return storage.RowCheck{}, nil, status.Errorf(codes.InvalidArgument, "%d rows, at most %d", len(pbThen), MaxMutations)
	}
	then, err := rowMutations(pbThen)
	return checks[0], then, err
}

// epochGuard refuses a call of the epoch given unless this run is it:
// run under the latches of every row the call writes.
func (s *storageService) epochGuard(epoch uint64) func() error {
	return func() error {
		if epoch != s.srv.epoch {
			return fmt.Errorf("%w: epoch %d, the server runs %d", errEpochChanged, epoch, s.srv.epoch)
		}
		return nil
	}
}

// CommitInEpoch implements rpcpb.StorageServer: CheckAndMutateInEpoch
// whose commit timestamp this server's oracle hands out under the
// latches, after the predicate matched, and checks the observer
// registry's version with it where the client names one
// (storage.EpochStamper). The server attaches its allocator to its store
// at Open, so the store always takes it.
func (s *storageService) CommitInEpoch(ctx context.Context, req *rpcpb.CommitInEpochRequest) (*rpcpb.CommitInEpochResponse, error) {
	check, then, err := epochCall(req.Check, req.Then)
	if err != nil {
		return nil, err
	}
	if len(req.Stamped) > MaxMutations {
		return nil, status.Errorf(codes.InvalidArgument, "%d stamped rows, at most %d", len(req.Stamped), MaxMutations)
	}
	stamped, err := rowMutations(req.Stamped)
	if err != nil {
		return nil, err
	}
	registry, err := s.registryGuard(ctx, req.ObserversVersion)
	if err != nil {
		return nil, err
	}
	ts, matched, err := s.st().CommitInEpochGuarded(ctx, check, then, stamped, s.epochGuard(req.Epoch), registry)
	if err != nil {
		return nil, s.srv.status(err)
	}
	s.srv.countBranch(check.IfTrue, check.IfFalse, matched)
	return &rpcpb.CommitInEpochResponse{Matched: matched, CommitTs: ts}, nil
}
