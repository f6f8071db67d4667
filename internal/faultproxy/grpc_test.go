package faultproxy

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// blockService is the health service name whose Check waits until its
// stream ends, to hold a call in flight.
const blockService = "block"

// callTimeout is the deadline of every call: short enough that a call that
// should fail fast but hangs shows up as DeadlineExceeded.
const callTimeout = 2 * time.Second

// countingHealth is the standard health service that counts the Check
// handlers that ran, so a test can tell a call the server applied from
// one it never saw.
type countingHealth struct {
	*health.Server
	ran      atomic.Int64
	entered  chan struct{} // a blockService Check has started
	canceled chan struct{} // a blockService Check saw its context end
}

func (h *countingHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.ran.Add(1)
	if req.GetService() != blockService {
		return h.Server.Check(ctx, req)
	}
	h.entered <- struct{}{}
	<-ctx.Done()
	h.canceled <- struct{}{}
	return nil, ctx.Err()
}

// grpcEnv is a gRPC health server, a proxy in front of it and a client
// that dials the proxy.
type grpcEnv struct {
	health *countingHealth
	proxy  *Proxy
	client healthpb.HealthClient
}

func newGRPCEnv(t *testing.T) *grpcEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &countingHealth{
		Server:   health.NewServer(),
		entered:  make(chan struct{}, 16),
		canceled: make(chan struct{}, 16),
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	p := newProxy(t, ln.Addr().String())
	return &grpcEnv{health: h, proxy: p, client: dialHealth(t, p.Addr(), insecure.NewCredentials())}
}

// dialHealth returns a health client of its own connection to addr,
// closed when the test ends.
func dialHealth(t *testing.T, addr string, creds credentials.TransportCredentials) healthpb.HealthClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		// Reconnect at once, so recovery takes milliseconds, not seconds.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// check makes one Check call. It may be called from any goroutine.
func (e *grpcEnv) check(t *testing.T, service string, opts ...grpc.CallOption) error {
	return checkWith(t, e.client, callTimeout, service, opts...)
}

// checkWith makes one Check call on client with a deadline of timeout.
func checkWith(t *testing.T, client healthpb.HealthClient, timeout time.Duration, service string, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, opts...)
	return err
}

func (e *grpcEnv) mustCheck(t *testing.T, opts ...grpc.CallOption) {
	t.Helper()
	if err := e.check(t, "", opts...); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func (e *grpcEnv) expectRan(t *testing.T, want int64) {
	t.Helper()
	if got := e.health.ran.Load(); got != want {
		t.Fatalf("server ran %d handlers, want %d", got, want)
	}
}

func expectCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("call ended with %v (%v), want %v", got, err, want)
	}
}

func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(ioTimeout):
		t.Fatalf("timed out waiting until %s", what)
	}
}

func TestGRPCCallsPassThrough(t *testing.T) {
	e := newGRPCEnv(t)
	for range 3 {
		e.mustCheck(t)
	}
	e.expectRan(t, 3)
	if n := e.proxy.Dropped(); n != 0 {
		t.Fatalf("Dropped() = %d, want 0", n)
	}
}

// The case nonces exist for: the server applies the call, the client
// learns nothing but Unavailable, and its retry reaches the server again.
func TestGRPCDropNextResponseLosesAnAppliedCall(t *testing.T) {
	e := newGRPCEnv(t)
	e.mustCheck(t) // connect first, so only the call's own frames are in play
	e.proxy.DropNextResponse()
	expectCode(t, e.check(t, ""), codes.Unavailable)
	e.expectRan(t, 2)
	if n := e.proxy.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d, want 1", n)
	}

	e.mustCheck(t) // the client reconnects; the proxy is disarmed
	e.expectRan(t, 3)
	if n := e.proxy.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d after the retry, want 1", n)
	}
}

func TestGRPCCutBreaksInFlightCall(t *testing.T) {
	e := newGRPCEnv(t)
	errc := make(chan error, 1)
	go func() { errc <- e.check(t, blockService) }()
	wait(t, e.health.entered, "the call reached the server")
	e.proxy.Cut()
	expectCode(t, <-errc, codes.Unavailable)
	wait(t, e.health.canceled, "the server saw its connection closed")

	e.mustCheck(t)
	e.expectRan(t, 2)
}

func TestGRPCRefuseFailsFastThenRecovers(t *testing.T) {
	e := newGRPCEnv(t)
	e.mustCheck(t)
	e.proxy.SetRefuse(true)
	e.proxy.Cut()
	// Unavailable, not DeadlineExceeded: the call failed without waiting.
	expectCode(t, e.check(t, ""), codes.Unavailable)
	e.expectRan(t, 1)

	e.proxy.SetRefuse(false)
	// WaitForReady: the channel may still be in back-off from the refusal.
	e.mustCheck(t, grpc.WaitForReady(true))
	e.expectRan(t, 2)
}

// Callers race with arming and cuts. Whatever interleaving happens, every
// call succeeds or fails with Unavailable, every success was run by the
// server, and the proxy never replays a request.
func TestGRPCConcurrentCallsUnderFaults(t *testing.T) {
	e := newGRPCEnv(t)
	const callers, calls = 4, 25
	var ok, unavailable, arms atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := range calls {
				switch err := e.check(t, ""); status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.Unavailable:
					unavailable.Add(1)
				default:
					t.Errorf("call ended with %v", err)
				}
				if i%7 == 3 {
					arms.Add(1)
					e.proxy.DropNextResponse()
				}
				if i%11 == 5 {
					e.proxy.Cut()
				}
			}
		})
	}
	wg.Wait()

	ran := e.health.ran.Load()
	if ran < ok.Load() || ran > callers*calls {
		t.Errorf("server ran %d handlers for %d calls of which %d succeeded", ran, callers*calls, ok.Load())
	}
	if d := e.proxy.Dropped(); int64(d) > arms.Load() {
		t.Errorf("Dropped() = %d after %d armings", d, arms.Load())
	}
	t.Logf("%d ok, %d unavailable, %d dropped", ok.Load(), unavailable.Load(), e.proxy.Dropped())
	// The proxy may still be armed: then one more call is lost, and the
	// retry after it goes through.
	if err := e.check(t, "", grpc.WaitForReady(true)); err != nil {
		expectCode(t, err, codes.Unavailable)
		e.mustCheck(t, grpc.WaitForReady(true))
	}
}

// DropNextResponseThenRefuse: the call is applied and its reply lost, and
// no retry reaches the server until the test lets it.
func TestGRPCDropThenRefuseHoldsTheRetry(t *testing.T) {
	e := newGRPCEnv(t)
	e.mustCheck(t)
	e.proxy.DropNextResponseThenRefuse()
	expectCode(t, e.check(t, ""), codes.Unavailable)
	e.expectRan(t, 2)
	for range 3 { // retries are refused, never run
		expectCode(t, e.check(t, ""), codes.Unavailable)
	}
	e.expectRan(t, 2)
	if n := e.proxy.Dropped(); n != 1 {
		t.Fatalf("Dropped() = %d, want 1", n)
	}

	e.proxy.SetRefuse(false)
	e.mustCheck(t, grpc.WaitForReady(true))
	e.expectRan(t, 3)
	e.mustCheck(t) // disarmed: the next reply passes
	e.expectRan(t, 4)
}
