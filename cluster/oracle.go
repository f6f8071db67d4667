package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// DefaultOracleDrain bounds how long ServeOracle waits for the calls in
// flight after it resigned.
const DefaultOracleDrain = 5 * time.Second

// OracleOptions configures ServeOracle: one candidate of the elected
// timestamp oracle (`percolator oracle`).
type OracleOptions struct {
	// Etcd lists the etcd endpoints. Required.
	Etcd []string
	// Prefix is the prefix of the election's and the mark's etcd keys.
	// Default etcd.DefaultOraclePrefix.
	Prefix string
	// Lease is the election lease. Default etcd.DefaultOracleLease.
	Lease time.Duration
	// Bigtable names the deployment's table: the leader keeps a copy of
	// its mark there, and its replies carry the table's observer
	// registry version (observer.StoredVersion).
	Bigtable bigtable.Options
	// Listener is where the candidate serves; Advertise, the address
	// clients dial, published in etcd when it leads (default the
	// listener's address).
	Listener  net.Listener
	Advertise string
	// Server holds the gRPC server's token, TLS and logger; ServeOracle
	// sets its Store and RegistryVersion.
	Server server.OracleOptions
	// Standing, if set, is called once the candidate stands for
	// election, with a function that reports whether it leads now (a
	// status page reads it).
	Standing func(leading func() bool)
	// Drain bounds the wait for the calls in flight after resigning.
	// Default DefaultOracleDrain.
	Drain time.Duration
}

// ServeOracle runs one oracle candidate until ctx ends, then resigns (a
// standby takes over at once) and drains; it returns nil after a clean
// stop. It checks etcd and the table before it stands: a wrong endpoint
// or table is an error, not a candidate that never leads. The listener
// is the caller's to close.
func ServeOracle(ctx context.Context, o OracleOptions) error {
	if o.Advertise == "" {
		o.Advertise = o.Listener.Addr().String()
	}
	if o.Server.Logger == nil {
		o.Server.Logger = slog.Default()
	}
	cli, err := dialChecked(ctx, o.Etcd)
	if err != nil {
		return err
	}
	defer cli.Close()
	st, err := bigtable.Open(ctx, o.Bigtable)
	if err != nil {
		return err
	}
	defer st.Close() // after the server has stopped
	o.Server.Store, o.Server.RegistryVersion = st, observer.StoredVersion
	log := o.Server.Logger
	log.Info("oracle: the mark's copy and the observer registry version in", "bigtable", o.Bigtable.Project+"/"+o.Bigtable.Instance+"/"+o.Bigtable.Table)
	cand, err := etcd.StartCandidate(cli, etcd.CandidateOptions{Addr: o.Advertise, Prefix: o.Prefix, TTL: o.Lease, Store: st, Logger: log})
	if err != nil {
		return err
	}
	if o.Standing != nil {
		o.Standing(cand.Leading)
	}
	return o.serve(ctx, cand, server.NewOracleServer(cand, o.Server))
}

// dialChecked connects to etcd and checks that it answers within 5s, so
// a wrong endpoint is a clear error.
func dialChecked(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: attemptTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, "percolator-connection-check", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("etcd %s unreachable (no answer within %v): %w", strings.Join(endpoints, ","), attemptTimeout, err)
	}
	return cli, nil
}

// serve serves the candidate until ctx ends, then resigns and drains.
func (o *OracleOptions) serve(ctx context.Context, cand *etcd.Candidate, srv *server.OracleServer) error {
	log := o.Server.Logger
	log.Info("oracle: candidate serving", "listen", o.Listener.Addr().String(), "etcd", strings.Join(o.Etcd, ","))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(o.Listener) }()
	select {
	case err := <-done:
		_ = cand.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("oracle: resigning", "cause", context.Cause(ctx))
	err := cand.Close() // first: no timestamp after this, and a standby leads
	drain := o.Drain
	if drain == 0 {
		drain = DefaultOracleDrain
	}
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := errors.Join(err, srv.Shutdown(sctx), <-done); err != nil {
		return err
	}
	log.Info("oracle: stopped")
	return nil
}
