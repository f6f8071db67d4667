package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
)

// grpcStatus maps an error of either role's services (a store, the nonce
// table, a limit, an allocator: the server's or an elected one) to the
// gRPC status its client reads back (rpc.Code): an error already a status
// as it is, nil as nil.
//
// Unavailable means "ask again, here or at another server": the store
// closed or failed, or an oracle that cannot hand out timestamps now (not
// the leader, its lease lost, closed) — a client of the oracle role then
// resolves the leader again.
func grpcStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var limit *limitError
	switch {
	case errors.As(err, &limit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, storage.ErrNoSpace):
		return status.Error(codes.ResourceExhausted, rpc.MsgNoSpace+": "+err.Error())
	case errors.Is(err, storage.ErrInvalidArgument), errors.Is(err, oracle.ErrInvalidArgument),
		errors.Is(err, errNonceReused), errors.Is(err, errInvalidNonce):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errUnknownGroup):
		return status.Error(codes.FailedPrecondition, rpc.MsgUnknownGroup+": "+err.Error())
	case errors.Is(err, errEpochChanged):
		return status.Error(codes.FailedPrecondition, rpc.MsgEpochChanged+": "+err.Error())
	case errors.Is(err, storage.ErrObserversMoved):
		return status.Error(codes.FailedPrecondition, rpc.MsgObserversMoved+": "+err.Error())
	case errors.Is(err, storage.ErrNoOnePhase):
		return status.Error(codes.FailedPrecondition, rpc.MsgNoOnePhase+": "+err.Error())
	case errors.Is(err, errBelowMark):
		return status.Error(codes.FailedPrecondition, rpc.MsgBelowMark+": "+err.Error())
	case errors.Is(err, storage.ErrClosed), errors.Is(err, storage.ErrFailed),
		errors.Is(err, oracle.ErrLeaseLost), errors.Is(err, oracle.ErrNotLeader), errors.Is(err, oracle.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
