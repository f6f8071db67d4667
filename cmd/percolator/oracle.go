package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
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

// oracleDrainTimeout bounds how long oracle waits for calls in flight
// after it resigned.
const oracleDrainTimeout = 5 * time.Second

// percolator oracle: one candidate of the distributed deployment's
// timestamp oracle. Run two or more on an etcd cluster; the one etcd
// elects hands out timestamps (its high-water mark kept in etcd), the
// others stand by and answer Unavailable, and clients find the leader
// through etcd (coord/etcd). SIGTERM resigns, so a standby takes over at
// once, and exits 0. --bigtable, the deployment's table, is required: the
// leader writes a copy of its mark there before use and a new leader
// resumes at the larger of the two marks, and each reply carries the
// observer registry version read from it after allocating, which spares
// every committer a read of its own.
func runOracle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("oracle", stderr)
	endpoints := fs.String("etcd", "", "etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379); required")
	prefix := fs.String("etcd-prefix", etcd.DefaultOraclePrefix, "prefix of the election's and the mark's etcd keys")
	table := fs.String("bigtable", "", "the deployment's Cloud Bigtable table PROJECT/INSTANCE/TABLE (BIGTABLE_EMULATOR_HOST is honoured), the one the clients use; required: the oracle keeps a copy of its mark there (so etcd restored from an older backup cannot move timestamps back), and its replies carry the table's observer registry version, so committers need not read it")
	listen := fs.String("listen", "127.0.0.1:7430", "address to serve the oracle's gRPC on")
	advertise := fs.String("advertise", "", "address clients dial, published in etcd (default: the listen address)")
	lease := fs.Duration("lease", etcd.DefaultOracleLease, "election lease, whole seconds (etcd raises it to its minimum, about 2s): a dead leader is replaced within about this")
	tokenFile := fs.String("token-file", "", "file holding the token every call must carry (default: $PERCOLATOR_TOKEN; none: no token required)")
	certFile := fs.String("tls-cert", "", "TLS certificate (PEM); with --tls-key, serve TLS")
	keyFile := fs.String("tls-key", "", "TLS private key (PEM)")
	insecure := fs.Bool("insecure", false, "allow a --listen address beyond loopback without TLS: the token and every request and reply then cross the network in clear, so anyone who can see the traffic can take the token and ask for timestamps (use --tls-cert/--tls-key instead)")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	eps, err := oracleFlagsValid(fs, *endpoints, *prefix, *lease, *certFile, *keyFile, *logFormat)
	if err != nil {
		return err
	}
	var btOpts bigtable.Options
	if *table == "" {
		return usagef("--bigtable is required: the deployment's table, where the oracle keeps a copy of its mark")
	}
	if err := btOpts.ParseTable(*table); err != nil {
		return usagef("--bigtable: %v", err)
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	if *insecure && *certFile != "" {
		return usagef("--insecure and --tls-cert contradict each other: with TLS nothing crosses the network in clear")
	}
	beyond, err := checkListen(*listen, token, *certFile != "", *insecure)
	if err != nil {
		return err
	}
	log := newLogger(stderr, *logFormat, *verbose)
	if beyond && *certFile == "" {
		log.Warn("serving beyond loopback without TLS (--insecure): the token and every request and reply cross the network in clear", "listen", *listen)
	}
	opts := server.OracleOptions{Token: token, Logger: log}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer lis.Close()
	addr, err := advertised(*advertise, lis.Addr().String())
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
	log.Info("oracle: the mark's copy and the observer registry version in", "bigtable", *table)
	cand, err := etcd.StartCandidate(cli, etcd.CandidateOptions{Addr: addr, Prefix: *prefix, TTL: *lease, Store: st, Logger: log})
	if err != nil {
		return err
	}
	return serveOracle(ctx, log, cand, server.NewOracleServer(cand, opts), lis, eps)
}

// oracleFlagsValid checks oracle's flags and returns the etcd endpoints.
func oracleFlagsValid(fs *flag.FlagSet, endpoints, prefix string, lease time.Duration, cert, key, logFormat string) ([]string, error) {
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected arguments %q", fs.Args())
	case strings.TrimSpace(endpoints) == "":
		return nil, usagef("--etcd is required: the etcd cluster's endpoints, comma-separated")
	case prefix == "":
		return nil, usagef("--etcd-prefix must not be empty")
	case lease < time.Second || lease > time.Hour || lease%time.Second != 0:
		return nil, usagef("--lease %v: etcd leases are whole seconds, from 1s to 1h", lease)
	case (cert == "") != (key == ""):
		return nil, usagef("--tls-cert and --tls-key go together")
	case logFormat != "text" && logFormat != "json":
		return nil, usagef("--log-format is text or json")
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

// newLogger is the structured logger on stderr of the long-running
// commands.
func newLogger(stderr io.Writer, format string, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, hopts))
	}
	return slog.New(slog.NewTextHandler(stderr, hopts))
}
