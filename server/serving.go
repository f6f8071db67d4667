package server

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/rpc"
)

// serving is the gRPC server both roles (Server, OracleServer) run their
// services on, with its health service and the drain signal: how either
// serves, drains and stops.
//
// A graceful stop waits for every call and stream in flight, so the
// streams that last as long as their client end when the server drains,
// instead of holding it: an allocation stream sends first = 0 (its client
// reopens it, at the next server), a health Watch sends NOT_SERVING and
// ends (drainingHealth).
//
// Concurrency: init runs once, before the other methods; those are safe
// for concurrent use.
type serving struct {
	grpc   *grpc.Server
	health *health.Server
	// draining is closed, once, when the server begins to drain or
	// stops: long-lived streams end.
	draining  chan struct{}
	drainOnce sync.Once
}

// streamWorkers is how many goroutines per core serve calls (gRPC's
// NumStreamWorkers). gRPC otherwise starts a goroutine per call, whose
// stack then grows (runtime.morestack copying it) on every call as deep
// as the handler goes: pebble's iterators go deep. A worker keeps its
// grown stack from call to call. A call that blocks (a log sync, a
// latch, a long-lived stream) holds its worker; when every worker is
// busy, a call gets a goroutine of its own, as without workers. Many
// calls wait on a log sync at once under load (a bank run has hundreds
// of callers), so the pool is large; an idle worker costs its stack.
// With 128 callers on 2 cores, 64 workers per core against 16 took
// CheckAndMutate from 85-90 to 73-85 µs of CPU per call
// (BenchmarkRPC with SetParallelism(64)); reads did not change.
const streamWorkers = 64

// init makes the gRPC server with sopts and registers the health service
// on it. The caller registers its own services on grpc before serving.
func (s *serving) init(sopts []grpc.ServerOption) {
	workers := uint32(streamWorkers * runtime.GOMAXPROCS(0))
	s.grpc = grpc.NewServer(append(sopts, grpc.NumStreamWorkers(workers), rpc.CodecServerOption())...)
	s.health = health.NewServer()
	s.draining = make(chan struct{})
	healthpb.RegisterHealthServer(s.grpc, drainingHealth{s.health, s.draining})
}

// serve reports SERVING and serves lis until a stop, which returns nil.
func (s *serving) serve(lis net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// drain ends the long-lived streams; idempotent.
func (s *serving) drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// gracefulStop stops accepting calls, tells health watchers NOT_SERVING
// and ends the long-lived streams, and waits for the calls in flight, or
// for ctx: then it cancels them and returns ctx's error.
func (s *serving) gracefulStop(ctx context.Context) error {
	s.health.Shutdown()
	s.drain()
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return ctx.Err()
	}
}

// stopNow stops serving at once, abandoning the calls in flight.
func (s *serving) stopNow() {
	s.drain()
	s.grpc.Stop()
}

// drainingHealth is the health service, whose Watch streams end when the
// server drains. A Watch lasts until its client hangs up, and a graceful
// stop waits for every stream: an idle watcher (a load balancer, a
// probe) would hold the drain for its whole timeout.
type drainingHealth struct {
	*health.Server
	draining <-chan struct{}
}

// Watch implements healthpb.HealthServer: health.Server's Watch until
// the server drains; then NOT_SERVING is the stream's last status (sent
// here unless health.Server's Shutdown got it out first), and the stream
// ends Unavailable, so the client looks for a server elsewhere.
func (h drainingHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-h.draining:
			cancel()
		case <-stop:
		}
	}()
	ws := &watchStream{Health_WatchServer: stream, ctx: ctx}
	err := h.Server.Watch(req, ws)
	select {
	case <-h.draining:
	default:
		return err
	}
	// The inner Watch has returned: no other Send runs now.
	if stream.Context().Err() == nil && ws.last != healthpb.HealthCheckResponse_NOT_SERVING {
		_ = stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
	}
	return status.Error(codes.Unavailable, "server shutting down")
}

// watchStream is a Watch stream with a context that ends on drain, and
// the last status sent on it.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx  context.Context
	last healthpb.HealthCheckResponse_ServingStatus
}

func (w *watchStream) Context() context.Context { return w.ctx }

func (w *watchStream) Send(r *healthpb.HealthCheckResponse) error {
	w.last = r.Status
	return w.Health_WatchServer.Send(r)
}
