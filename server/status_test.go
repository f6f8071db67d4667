package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage"
)

// TestGRPCStatus: each role's errors, wrapped as the services wrap them,
// map to the code their clients act on; a status passes as it is.
func TestGRPCStatus(t *testing.T) {
	already := status.Error(codes.NotFound, "no such session")
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{already, codes.NotFound},
		{&limitError{what: "sessions"}, codes.ResourceExhausted},
		{storage.ErrInvalidArgument, codes.InvalidArgument},
		{oracle.ErrInvalidArgument, codes.InvalidArgument},
		{errNonceReused, codes.InvalidArgument},
		{errInvalidNonce, codes.InvalidArgument},
		{errUnknownGroup, codes.FailedPrecondition},
		{errBelowMark, codes.FailedPrecondition},
		{storage.ErrClosed, codes.Unavailable},
		{storage.ErrFailed, codes.Unavailable},
		{oracle.ErrLeaseLost, codes.Unavailable},
		{oracle.ErrNotLeader, codes.Unavailable},
		{oracle.ErrClosed, codes.Unavailable},
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{errors.New("disk on fire"), codes.Internal},
	} {
		err := c.err
		if err != nil && err != already {
			err = fmt.Errorf("server: wrapped: %w", err)
		}
		got := grpcStatus(err)
		if status.Code(got) != c.want {
			t.Errorf("grpcStatus(%v) = %v; want %v", err, got, c.want)
		}
		if c.err == already && got != already {
			t.Errorf("a status was rewritten: %v", got)
		}
	}
}
