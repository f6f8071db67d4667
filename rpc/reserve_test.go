package rpc

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/seed-992972ee/percolator/storage"
)

// TestSendReserve: a call whose context storage.WithReserve marks carries
// ReserveHeader, and no other call does.
func TestSendReserve(t *testing.T) {
	for _, marked := range []bool{false, true} {
		ctx := context.Background()
		if marked {
			ctx = storage.WithReserve(ctx)
		}
		var got []string
		invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			md, _ := metadata.FromOutgoingContext(ctx)
			got = md.Get(ReserveHeader)
			return nil
		}
		if err := sendReserve(ctx, "/m", nil, nil, nil, invoker); err != nil {
			t.Fatal(err)
		}
		if (len(got) == 1) != marked {
			t.Errorf("marked %v: header %q", marked, got)
		}
	}
}
