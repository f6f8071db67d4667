package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
)

var ctx = context.Background()

// rawConn is a gRPC connection to addr without a token, for calls the
// rpc package would refuse to make or would retry.
func rawConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// metric returns the value of the sample named series (name{labels}, the
// labels in the exposition's order), 0 if absent.
func metric(t *testing.T, srv *servertest.Server, series string) float64 {
	t.Helper()
	v, _ := metricOK(t, srv, series)
	return v
}

func metricOK(t *testing.T, srv *servertest.Server, series string) (float64, bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(scrape(t, srv)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f, true
		}
	}
	return 0, false
}

func scrape(t *testing.T, srv *servertest.Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

// snapshot is everything a client can change in the store but the
// oracle's lease (renewed in the background): every cell of the test
// families and every record (nonce groups and calls).
func snapshot(t *testing.T, srv *servertest.Server) string {
	t.Helper()
	var b strings.Builder
	filter := storage.Filter{{Family: "c", AllQualifiers: true}}
	err := srv.Store().Scan(ctx, nil, nil, filter, 0, func(r storage.Row) bool {
		fmt.Fprintf(&b, "row %q %v\n", r.Key, r.Cells)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Store().ScanRecords(ctx, nil, func(k, v []byte) bool {
		fmt.Fprintf(&b, "record %q %x\n", k, v)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// settle writes what the nonce table has collected (the raised marks and
// the records they drop), which the background flush would write later.
func settle(t *testing.T, srv *servertest.Server) {
	t.Helper()
	if err := srv.FlushNonces(ctx); err != nil {
		t.Fatal(err)
	}
}

// allocate takes one timestamp.
func allocate(t *testing.T, conn *rpc.Conn) uint64 {
	t.Helper()
	resp, err := conn.Oracle.Allocate(ctx, &rpcpb.AllocateRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	return resp.First
}

// unchanged checks that the store holds before and that the oracle goes
// on from last.
func unchanged(t *testing.T, srv *servertest.Server, conn *rpc.Conn, before string, last uint64) {
	t.Helper()
	if after := snapshot(t, srv); after != before {
		t.Errorf("the store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if next := allocate(t, conn); next != last+1 {
		t.Errorf("the oracle handed out %d after %d: timestamps were consumed", next, last)
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Errorf("%s: %v %q, want %v saying %q", what, st.Code(), st.Message(), code, msg)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
