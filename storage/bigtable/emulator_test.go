package bigtable_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
)

// TestEmulatorStreamAwaitingRequest: a client that opened a streaming
// call (ReadRows, MutateRows) but has not sent its request yet — a
// process stopped (SIGSTOP) between the two, or just slow — must not stop
// the emulator serving everyone else. (Its exclusion lock used to be
// taken before the request was read, so that one stopped client stalled
// every write, and every read queued behind them, until it resumed.)
func TestEmulatorStreamAwaitingRequest(t *testing.T) {
	emu := bttesting.Start(t)
	s := bttesting.Open(t, emu, "stall")
	cc, err := grpc.NewClient(emu.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, method := range []string{"ReadRows", "MutateRows"} {
		// The stream's headers go now; its request never does.
		if _, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/google.bigtable.v2.Bigtable/"+method); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the emulator has the headers
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	row := []byte("r")
	if err := s.Mutate(wctx, row, storage.SetCell("f", "c", 1, []byte("v"))); err != nil {
		t.Fatalf("a write while another client's stream awaits its request: %v", err)
	}
	if _, err := s.ReadRow(wctx, row, storage.Filter{{Family: "f", AllQualifiers: true}}); err != nil {
		t.Fatalf("a read while another client's stream awaits its request: %v", err)
	}
}
