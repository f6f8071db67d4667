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
	var guard func() error
	if req.ObserversVersion != nil {
		version := s.srv.latchedVersion
		if version == nil {
			return nil, s.srv.status(storage.ErrNoOnePhase)
		}
		want := *req.ObserversVersion
		// Read once the timestamp is taken: a registration raises the
		// version before its backfill takes a timestamp, which waits for
		// this commit if its timestamp is older (txn/doc.go, "One-phase
		// commit").
		guard = func() error {
			v, err := version(ctx)
			if err != nil {
				return err
			}
			if v != want {
				return fmt.Errorf("%w: version %d, the commit was built under %d", storage.ErrObserversMoved, v, want)
			}
			return nil
		}
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
