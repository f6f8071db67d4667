package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// CommitOnePhase implements rpcpb.StorageServer: a one-row transaction's
// commit (storage.OnePhaser), its timestamp handed out by this server's
// oracle under the row latch, its row marked as committing until the write is
// visible (txn/doc.go, "One-phase commit"). The server attaches its
// allocator to its store at Open, so the store always takes it.
func (s *storageService) CommitOnePhase(ctx context.Context, req *rpcpb.CommitOnePhaseRequest) (*rpcpb.CommitOnePhaseResponse, error) {
	if err := firstError(checkRow(req.Row), checkFilter(req.Predicate, "predicate"),
		checkMutations(req.Mutations, "mutations"), checkMutations(req.Stamped, "stamped")); err != nil {
		return nil, err
	}
	if len(req.Stamped) == 0 {
		return nil, status.Error(codes.InvalidArgument, "nothing to stamp")
	}
	muts, stamped := rpc.MutationsFromPB(req.Mutations), rpc.MutationsFromPB(req.Stamped)
	guard, err := s.registryGuard(ctx, req.ObserversVersion)
	if err != nil {
		return nil, err
	}
	ts, conflict, err := s.st().CommitOnePhaseGuarded(ctx, req.Row, nil, rpc.FilterFromPB(req.Predicate), muts, stamped, guard)
	if err != nil {
		return nil, s.srv.status(err)
	}
	kind := txn.CASConflict
	if !conflict {
		kind = txn.CASOnePhase
	}
	s.srv.countKind(kind)
	return &rpcpb.CommitOnePhaseResponse{Conflict: conflict, CommitTs: ts}, nil
}

// registryGuard is the check a call that takes its timestamp under the
// latches makes of the observer registry, when the client names the
// version it built the call under (want): read once the timestamp is
// taken, under the latch view, so a registration, which raises the
// version before its backfill takes a timestamp, is either seen here or
// backfills the call's writes (txn/doc.go, "One-phase commit"). nil
// when want is; ErrNoOnePhase when this server reads no registry
// version.
func (s *storageService) registryGuard(ctx context.Context, want *uint64) (func() error, error) {
	if want == nil {
		return nil, nil
	}
	version := s.srv.latchedVersion
	if version == nil {
		return nil, s.srv.status(storage.ErrNoOnePhase)
	}
	return func() error {
		v, err := version(ctx)
		if err != nil {
			return err
		}
		if v != *want {
			return fmt.Errorf("%w: version %d, the commit was built under %d", storage.ErrObserversMoved, v, *want)
		}
		return nil
	}, nil
}

// PrewriteAsync implements rpcpb.StorageServer: an async-commit
// transaction's prewrites (storage.AsyncPrewriter), their locks stamped
// with a timestamp this server's oracle hands out under the rows'
// latches, the rows marked as committing until the write is visible
// (txn/doc.go, "Async commit").
func (s *storageService) PrewriteAsync(ctx context.Context, req *rpcpb.PrewriteAsyncRequest) (*rpcpb.PrewriteAsyncResponse, error) {
	if len(req.Checks) == 0 || len(req.Checks) > MaxMutations {
		return nil, status.Errorf(codes.InvalidArgument, "%d checks, at least 1 and at most %d", len(req.Checks), MaxMutations)
	}
	checks := make([]storage.AsyncCheck, len(req.Checks))
	for i, ch := range req.Checks {
		if ch == nil {
			return nil, status.Errorf(codes.InvalidArgument, "check %d is empty", i)
		}
		if err := firstError(checkRow(ch.Row), checkFilter(ch.Predicate, "predicate"),
			checkMutations(ch.Mutations, "mutations"), checkMutations(ch.Stamped, "stamped")); err != nil {
			return nil, err
		}
		checks[i] = storage.AsyncCheck{Row: ch.Row, Predicate: rpc.FilterFromPB(ch.Predicate),
			Mutations: rpc.MutationsFromPB(ch.Mutations), Stamped: rpc.MutationsFromPB(ch.Stamped)}
	}
	guard, err := s.registryGuard(ctx, req.ObserversVersion)
	if err != nil {
		return nil, err
	}
	ts, conflict, err := s.st().PrewriteAsyncGuarded(ctx, checks, nil, guard)
	if err != nil {
		return nil, s.srv.status(err)
	}
	for _, c := range conflict {
		kind := txn.CASConflict
		if !c {
			kind = txn.CASAsyncPrewrite
		}
		s.srv.countKind(kind)
	}
	return &rpcpb.PrewriteAsyncResponse{Ts: ts, Conflict: conflict}, nil
}
