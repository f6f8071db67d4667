package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
)

// tokenAuth requires a token on every call (none if the token is empty):
// the interceptors of both the server and the oracle role.
type tokenAuth struct {
	required bool
	sum      [32]byte // sha256 of the token
}

func newTokenAuth(token string) tokenAuth {
	return tokenAuth{required: token != "", sum: sha256.Sum256([]byte(token))}
}

// authorized checks the call's token in constant time (hashes of equal
// length are compared, so the token's length is not revealed either).
func (a tokenAuth) authorized(ctx context.Context) error {
	if !a.required {
		return nil
	}
	// ValueFromIncomingContext copies the header's values alone, not
	// the whole metadata as FromIncomingContext does.
	for _, v := range metadata.ValueFromIncomingContext(ctx, rpc.TokenHeader) {
		got := sha256.Sum256([]byte(strings.TrimPrefix(v, "Bearer ")))
		if subtle.ConstantTimeCompare(got[:], a.sum[:]) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "missing or wrong token (--token-file or PERCOLATOR_TOKEN)")
}

func (a tokenAuth) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := a.authorized(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (a tokenAuth) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := a.authorized(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// takeReserve marks a call's context storage.WithReserve when the client
// sent rpc.ReserveHeader: its writes may use a nearly full store's
// reserve (a client's commit or rollback of a transaction already
// prewritten, a resolution; the client marks them). A client holding the
// token is trusted with the store's data anyway, and may use the reserve
// too.
func takeReserve(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if len(metadata.ValueFromIncomingContext(ctx, rpc.ReserveHeader)) > 0 {
		ctx = storage.WithReserve(ctx)
	}
	return h(ctx, req)
}
