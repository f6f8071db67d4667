package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// oracleDrainTimeout bounds how long oracle waits for calls in flight
// after it resigned.
const oracleDrainTimeout = 5 * time.Second

// oracleConfig is what `oracle` was asked for.
type oracleConfig struct {
	endpoints, prefix, table string
	advertise                string
	lease                    time.Duration
	listen                   listenFlags
	log                      logFlags

	// Set by validate.
	eps []string
	bt  bigtable.Options
}

// oracleCmd is `oracle`: one candidate of the distributed deployment's
// timestamp oracle. Run two or more on an etcd cluster; the one etcd
// elects hands out timestamps (its high-water mark kept in etcd), the
// others stand by and answer Unavailable, and clients find the leader
// through etcd (coord/etcd). SIGTERM resigns, so a standby takes over at
// once, and exits 0. --bigtable, the deployment's table, is required: the
// leader writes a copy of its mark there before use and a new leader
// resumes at the larger of the two marks, and each reply carries the
// observer registry version read from it after allocating, which spares
// every committer a read of its own.
func oracleCmd() *cobra.Command {
	var cfg oracleConfig
	c := &cobra.Command{
		Use:   "oracle",
		Short: "one candidate of the timestamp oracle elected through etcd (run two or more)",
		Example: `  percolator oracle --etcd http://127.0.0.1:2379 --bigtable P/I/T --listen 127.0.0.1:7431 &
  percolator oracle --etcd http://127.0.0.1:2379 --bigtable P/I/T --listen 127.0.0.1:7432 &`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runOracle(c.Context(), &cfg, c.ErrOrStderr()) },
	}
	fs := c.Flags()
	fs.StringVar(&cfg.endpoints, "etcd", "", "etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379); required")
	fs.StringVar(&cfg.prefix, "etcd-prefix", etcd.DefaultOraclePrefix, "prefix of the election's and the mark's etcd keys")
	fs.StringVar(&cfg.table, "bigtable", "", "the deployment's Cloud Bigtable table PROJECT/INSTANCE/TABLE (BIGTABLE_EMULATOR_HOST is honoured), the one the clients use; required: the oracle keeps a copy of its mark there (so etcd restored from an older backup cannot move timestamps back), and its replies carry the table's observer registry version, so committers need not read it")
	fs.StringVar(&cfg.advertise, "advertise", "", "address clients dial, published in etcd (default: the listen address)")
	fs.DurationVar(&cfg.lease, "lease", etcd.DefaultOracleLease, "election lease, whole seconds (etcd raises it to its minimum, about 2s): a dead leader is replaced within about this")
	cfg.listen.register(fs, "127.0.0.1:7430", "ask for timestamps")
	cfg.log.register(fs)
	return c
}

// validate checks the flags, and sets what they give: the etcd
// endpoints, the table, and the listen flags' token and TLS.
func (cfg *oracleConfig) validate() error {
	eps, err := oracleFlagsValid(cfg.endpoints, cfg.prefix, cfg.lease)
	if err != nil {
		return err
	}
	cfg.eps = eps
	if err := cfg.log.validate(); err != nil {
		return err
	}
	if cfg.table == "" {
		return usagef("--bigtable is required: the deployment's table, where the oracle keeps a copy of its mark")
	}
	if err := cfg.bt.ParseTable(cfg.table); err != nil {
		return usagef("--bigtable: %v", err)
	}
	return cfg.listen.check()
}

func runOracle(ctx context.Context, cfg *oracleConfig, stderr io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	eps, btOpts := cfg.eps, cfg.bt
	log := cfg.log.logger(stderr)
	if cfg.listen.beyond && cfg.listen.tls == nil {
		log.Warn("serving beyond loopback without TLS (--insecure): the token and every request and reply cross the network in clear", "listen", cfg.listen.addr)
	}
	opts := server.OracleOptions{Token: cfg.listen.token, Logger: log, TLS: cfg.listen.tls}
	lis, err := net.Listen("tcp", cfg.listen.addr)
	if err != nil {
		return err
	}
	defer lis.Close()
	addr, err := advertised(cfg.advertise, lis.Addr().String())
	if err != nil {
		return err
	}
	cli, err := dialEtcd(ctx, eps)
	if err != nil {
		return err
	}
	defer cli.Close()
	// Before the candidacy: a wrong table never leads.
	st, err := bigtable.Open(ctx, btOpts)
	if err != nil {
		return err
	}
	defer st.Close() // after the server has stopped
	opts.Store, opts.RegistryVersion = st, observer.StoredVersion
	log.Info("oracle: the mark's copy and the observer registry version in", "bigtable", cfg.table)
	cand, err := etcd.StartCandidate(cli, etcd.CandidateOptions{Addr: addr, Prefix: cfg.prefix, TTL: cfg.lease, Store: st, Logger: log})
	if err != nil {
		return err
	}
	return serveOracle(ctx, log, cand, server.NewOracleServer(cand, opts), lis, eps)
}

// oracleFlagsValid checks oracle's etcd flags and returns the endpoints.
func oracleFlagsValid(endpoints, prefix string, lease time.Duration) ([]string, error) {
	switch {
	case strings.TrimSpace(endpoints) == "":
		return nil, usagef("--etcd is required: the etcd cluster's endpoints, comma-separated")
	case prefix == "":
		return nil, usagef("--etcd-prefix must not be empty")
	case lease < time.Second || lease > time.Hour || lease%time.Second != 0:
		return nil, usagef("--lease %v: etcd leases are whole seconds, from 1s to 1h", lease)
	}
	var eps []string
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e == "" {
			return nil, usagef("--etcd %q has an empty endpoint", endpoints)
		}
		eps = append(eps, e)
	}
	return eps, nil
}

// advertised is the address published in etcd: --advertise, or the
// listener's own address unless that is a wildcard no client can dial.
func advertised(flagValue, listening string) (string, error) {
	if flagValue != "" {
		if _, _, err := net.SplitHostPort(flagValue); err != nil {
			return "", usagef("--advertise %s: %v", flagValue, err)
		}
		return flagValue, nil
	}
	host, _, err := net.SplitHostPort(listening)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", usagef("listening on %s: give --advertise, the address clients dial", listening)
	}
	return listening, nil
}

// dialEtcd connects to etcd and checks that it answers, so a wrong
// --etcd is a clear error, not a candidate that never leads.
func dialEtcd(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Get(cctx, "percolator-connection-check", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("etcd %s unreachable: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// serveOracle serves the candidate until ctx ends, then resigns (a
// standby takes over at once) and drains.
func serveOracle(ctx context.Context, log *slog.Logger, cand *etcd.Candidate, srv *server.OracleServer, lis net.Listener, eps []string) error {
	log.Info("oracle: candidate serving", "listen", lis.Addr().String(), "etcd", strings.Join(eps, ","))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		_ = cand.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("oracle: resigning", "cause", context.Cause(ctx))
	err := cand.Close() // first: no timestamp after this, and a standby leads
	sctx, cancel := context.WithTimeout(context.Background(), oracleDrainTimeout)
	defer cancel()
	if err := errors.Join(err, srv.Shutdown(sctx), <-done); err != nil {
		return err
	}
	log.Info("oracle: stopped")
	return errDrained
}
