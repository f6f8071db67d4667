package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/statuspage"
	"github.com/seed-992972ee/percolator/server"
)

// statusHTTP is a long-running command's HTTP listener: the status page
// at / and metrics at /metrics, behind the token when beyond loopback.
type statusHTTP struct {
	flags   *cli.HTTPFlags
	token   string      // required beyond loopback
	tls     *tls.Config // served beyond loopback; nil: none (--insecure)
	metrics http.Handler
	page    statuspage.Options
	log     *slog.Logger
}

// start serves the page and the metrics, and samples until stop, which
// waits for the sampler and then runs closeAfter (if set).
func (h statusHTTP) start(ctx context.Context, closeAfter func()) (stop func(), err error) {
	page, err := statuspage.New(h.page)
	if err != nil {
		return nil, err
	}
	return h.serve(ctx, page, closeAfter)
}

// serve is start with the page made.
func (h statusHTTP) serve(ctx context.Context, page *statuspage.Page, closeAfter func()) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h.metrics)
	mux.Handle("/", page)
	var handler http.Handler = mux
	var tlsConfig *tls.Config
	if h.flags.Beyond {
		handler, tlsConfig = statuspage.Protect(mux, h.token), h.tls
		if tlsConfig == nil {
			h.log.Warn("serving the status page beyond loopback without TLS (--insecure): the token crosses the network in clear", "http", h.flags.Addr)
		}
	}
	stopHTTP, err := cli.ServeHTTP(h.flags.Addr, tlsConfig, handler, h.log)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); page.Run(pctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			stopHTTP()
			if closeAfter != nil {
				closeAfter()
			}
		})
	}, nil
}

// processMetrics is /metrics of a process without figures of its own
// (worker, oracle): the Go runtime's and the process's.
func processMetrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// serveReader reads what a serve process knows: the server's figures
// from its metrics, the store's size on disk, and the observers' status
// through a client of its own on the server, opened at the first read
// and kept (it is one of the sessions the page counts).
type serveReader struct {
	srv  *server.Server
	dir  string
	opts percolator.Options // the client's: the server's address, token, CA
	db   *percolator.DB     // read and set by read only (the sampler)
}

// newServeReader dials the server at the listener's address (loopback
// for a wildcard address), with its token, trusting its certificate.
func newServeReader(srv *server.Server, dir string, lis net.Addr, listen *cli.ListenFlags) *serveReader {
	addr := lis.String()
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return &serveReader{srv: srv, dir: dir, opts: percolator.Options{Server: addr, Token: listen.Token, TLSCAFile: listen.CertFile(), RetryBudget: 5 * time.Second}}
}

func (r *serveReader) read(ctx context.Context) statuspage.Snapshot {
	snap := statuspage.Snapshot{Server: serverFigures(r.srv.Gatherer()),
		Oracle: &statuspage.Oracle{Leader: "This server hands out the timestamps (its own oracle)."}}
	if b, err := dirSize(filepath.Join(r.dir, "store")); err == nil {
		snap.Store = &statuspage.Store{Dir: r.dir, Bytes: b}
	}
	if r.db == nil {
		db, err := percolator.Open(ctx, r.opts)
		if err != nil {
			snap.ObserversErr = err
			return snap
		}
		r.db = db
	}
	snap.Observers, snap.ObserversErr = observerStatus(ctx, r.db)
	return snap
}

// close closes the reader's client; after the sampler has stopped.
func (r *serveReader) close() {
	if r.db != nil {
		_ = r.db.Close()
	}
}

// observerStatus reads the observers' status as `percolator status`
// does. It lists the observers first: that reloads the DB's registry,
// which its status takes the observers from, so those registered by
// other processes since the DB opened are shown.
func observerStatus(ctx context.Context, db *percolator.DB) (*percolator.ObserverStatus, error) {
	if _, err := db.Observers(ctx); err != nil {
		return nil, err
	}
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// serverFigures reads the server's figures from its metrics.
func serverFigures(g prometheus.Gatherer) *statuspage.Server {
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	s := &statuspage.Server{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "percolator_sessions":
			s.Sessions = int(sum(mf))
		case "percolator_advisory_locks":
			s.Locks = int(sum(mf))
		case "percolator_rpc_requests_total":
			s.Requests = sum(mf)
		case "percolator_gc_safe_point_lag_seconds":
			s.GCLag = time.Duration(sum(mf) * float64(time.Second)).Round(time.Second)
		}
	}
	return s
}

// sum adds up a family's gauges and counters.
func sum(mf *dto.MetricFamily) float64 {
	t := 0.0
	for _, m := range mf.GetMetric() {
		t += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return t
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file compacted away meanwhile
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}
