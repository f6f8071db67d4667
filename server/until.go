package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ServeUntil serves lis until ctx ends, then drains: it stops taking
// calls, waits up to drain for those in flight (then cancels them) and
// closes the server. It returns nil after a drain; if the store fails
// first, it shuts the server down and returns the failure.
func (s *Server) ServeUntil(ctx context.Context, lis net.Listener, drain time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	select {
	case err := <-done: // the store failed
		_ = s.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}
	s.log.Info("draining calls in flight", "cause", context.Cause(ctx))
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := errors.Join(s.Shutdown(sctx), <-done); err != nil {
		return err
	}
	s.log.Info("stopped")
	return nil
}

// ServeMetrics serves the server's Prometheus metrics at /metrics on
// addr, until stop.
func (s *Server) ServeMetrics(addr string) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	s.log.Info("serving metrics", "addr", lis.Addr().String())
	return func() { _ = hs.Close() }, nil
}
