package server

import (
	"context"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/txn"
)

// metrics are the server's Prometheus collectors, in a registry of the
// server's own (served on --http at /metrics). Every name begins with
// percolator_.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec   // method, code
	latency  *prometheus.HistogramVec // method
	replays  *prometheus.CounterVec   // method
	batches  prometheus.Counter
	batchTS  prometheus.Histogram
	cas      *prometheus.CounterVec // kind
	// casKinds are cas's children, one per kind ClassifyCAS returns;
	// read-only after newMetrics.
	casKinds map[string]prometheus.Counter
	// methods caches each method's children of requests and latency
	// (full method name -> *methodMetrics): WithLabelValues on every
	// call hashed its labels and took the vector's lock.
	methods sync.Map
}

// methodMetrics are one method's collectors.
type methodMetrics struct {
	name    string // the method's label: its full name's last element
	latency prometheus.Observer
	// byCode are its requests' children by status code, each made on
	// the first call that ends with that code (a code never seen has no
	// series, as without the cache).
	byCode [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
}

// oracleBatch counts one oracle request of count timestamps.
func (m *metrics) oracleBatch(count uint32) {
	m.batches.Inc()
	m.batchTS.Observe(float64(count))
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "percolator_rpc_requests_total", Help: "RPCs served, by method and gRPC status code.",
	}, []string{"method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "percolator_rpc_duration_seconds", Help: "RPC latency by method.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2.5, 14),
	}, []string{"method"})
	m.replays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "percolator_nonce_replays_total", Help: "Calls answered from the nonce table (a retry of a call that had run), by method.",
	}, []string{"method"})
	m.batches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "percolator_oracle_batches_total", Help: "Oracle requests served (each a batch of timestamps).",
	})
	m.batchTS = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "percolator_oracle_batch_size", Help: "Timestamps per oracle request.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	m.cas = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "percolator_txn_cas_total",
		Help: "Transaction steps seen as CheckAndMutate calls: prewrite, conflict (a refused prewrite), commit (a commit point or a roll-forward), rollback (a resolution or fence), lost (its lock was gone).",
	}, []string{"kind"})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func(txn.GCStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(s.gcStats())) })
	}
	m.reg.MustRegister(m.requests, m.latency, m.replays, m.batches, m.batchTS, m.cas,
		gauge("percolator_nonce_table_calls", "Calls held in the nonce table.", func() float64 { c, _ := s.nonces.size(); return float64(c) }),
		gauge("percolator_nonce_table_groups", "Nonce groups (client sessions) known.", func() float64 { _, g := s.nonces.size(); return float64(g) }),
		gauge("percolator_sessions", "Live liveness sessions.", func() float64 { n, _ := s.coord.size(); return float64(n) }),
		gauge("percolator_advisory_locks", "Advisory row locks held.", func() float64 { _, n := s.coord.size(); return float64(n) }),
		counter("percolator_gc_passes_total", "Garbage collection passes run.", func(g txn.GCStats) uint64 { return g.Passes }),
		counter("percolator_gc_versions_removed_total", "Versions (write records and data) the garbage collector removed.", func(g txn.GCStats) uint64 { return g.Versions }),
		counter("percolator_gc_bytes_removed_total", "Value bytes the garbage collector removed.", func(g txn.GCStats) uint64 { return g.Bytes }),
		counter("percolator_gc_rows_skipped_total", "Rows a garbage collection pass left for a live transaction's lock.", func(g txn.GCStats) uint64 { return g.Skipped }),
		gauge("percolator_gc_safe_point", "The garbage collector's safe point (a timestamp): no snapshot below it is readable.", func() float64 { return float64(s.gcStats().SafePoint) }),
		gauge("percolator_gc_safe_point_lag_seconds", "Time since the sample the safe point came from was taken (at least): how far back snapshots stay readable.", func() float64 {
			if at := s.gcStats().SampledAt; !at.IsZero() {
				return time.Since(at).Seconds()
			}
			return 0
		}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.casKinds = make(map[string]prometheus.Counter)
	for _, k := range []string{txn.CASPrewrite, txn.CASConflict, txn.CASCommit, txn.CASRollback, txn.CASLost, txn.CASOnePhase, txn.CASAsyncPrewrite} {
		m.casKinds[k] = m.cas.WithLabelValues(k)
	}
	return m
}

// countBranch counts a CheckAndMutate as the protocol step it is.
func (s *Server) countBranch(ifTrue, ifFalse []storage.Mutation, matched bool) {
	if k := txn.ClassifyCAS(ifTrue, ifFalse, matched); k != "" {
		s.countKind(k)
	}
}

// countKind counts one protocol step of kind (txn.ClassifyCAS's names).
func (s *Server) countKind(k string) {
	c, ok := s.metrics.casKinds[k]
	if !ok {
		c = s.metrics.cas.WithLabelValues(k)
	}
	c.Inc()
}

func (m *metrics) observe(fullMethod string, start time.Time, err error) {
	mm := m.method(fullMethod)
	mm.latency.Observe(time.Since(start).Seconds())
	m.requestsOf(mm, status.Code(err)).Inc()
}

// method returns fullMethod's collectors, made on its first call.
func (m *metrics) method(fullMethod string) *methodMetrics {
	if v, ok := m.methods.Load(fullMethod); ok {
		return v.(*methodMetrics)
	}
	name := path.Base(fullMethod)
	v, _ := m.methods.LoadOrStore(fullMethod, &methodMetrics{name: name, latency: m.latency.WithLabelValues(name)})
	return v.(*methodMetrics)
}

// requestsOf returns the requests counter of mm's calls that ended with
// code.
func (m *metrics) requestsOf(mm *methodMetrics, code codes.Code) prometheus.Counter {
	if int(code) >= len(mm.byCode) {
		return m.requests.WithLabelValues(mm.name, code.String())
	}
	if c := mm.byCode[code].Load(); c != nil {
		return *c
	}
	c := m.requests.WithLabelValues(mm.name, code.String())
	mm.byCode[code].Store(&c)
	return c
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.observe(info.FullMethod, start, err)
	return resp, err
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	m.observe(info.FullMethod, start, err)
	return err
}

// gcStats are the garbage collector's counters; zero when it is disabled.
func (s *Server) gcStats() txn.GCStats {
	if s.gc == nil {
		return txn.GCStats{}
	}
	return s.gc.GCStats()
}
