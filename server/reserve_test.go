package server

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
)

// TestTakeReserve: a call that carries rpc.ReserveHeader reaches the
// store with its context marked storage.WithReserve, and no other does.
func TestTakeReserve(t *testing.T) {
	for _, sent := range []bool{false, true} {
		md := metadata.MD{}
		if sent {
			md.Set(rpc.ReserveHeader, "1")
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)
		var marked bool
		_, err := takeReserve(ctx, nil, nil, func(ctx context.Context, _ any) (any, error) {
			marked = storage.UsesReserve(ctx)
			return nil, nil
		})
		if err != nil || marked != sent {
			t.Errorf("sent %v: marked %v, %v", sent, marked, err)
		}
	}
}
