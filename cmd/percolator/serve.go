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
	"net/http"
	"time"

	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/server"
)

// errDrained: a long-running command (serve, worker) stopped cleanly on a
// signal: exit 0.
var errDrained = errors.New("stopped cleanly")

// drainTimeout bounds how long serve waits for calls in flight at SIGTERM.
const drainTimeout = 30 * time.Second

// percolator serve: one process hosting the store, the timestamp oracle
// and the lock service over gRPC (server package). Beyond loopback it
// needs a token, and TLS (or --insecure, which its log warns about):
// without TLS the token crosses the network in clear.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	dir := fs.String("dir", "", "database directory (created if needed; the embedded layout, so a --dir database can be served)")
	listen := fs.String("listen", "127.0.0.1:7420", "address to serve gRPC on")
	metrics := fs.String("metrics", "", "address to serve Prometheus metrics on at /metrics (e.g. 127.0.0.1:7421; default none)")
	tokenFile := fs.String("token-file", "", "file holding the token every call must carry (default: $PERCOLATOR_TOKEN; none: no token required)")
	certFile := fs.String("tls-cert", "", "TLS certificate (PEM); with --tls-key, serve TLS")
	keyFile := fs.String("tls-key", "", "TLS private key (PEM)")
	insecure := fs.Bool("insecure", false, "allow a --listen address beyond loopback without TLS: the token and every request and reply then cross the network in clear, so anyone who can see the traffic can take the token and read and write the whole store (use --tls-cert/--tls-key instead)")
	var opts server.Options
	checkLimits := limitFlags(fs, &opts)
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected arguments %q", fs.Args())
	case *dir == "":
		return usagef("--dir is required")
	case (*certFile == "") != (*keyFile == ""):
		return usagef("--tls-cert and --tls-key go together")
	case *insecure && *certFile != "":
		return usagef("--insecure and --tls-cert contradict each other: with TLS nothing crosses the network in clear")
	case *logFormat != "text" && *logFormat != "json":
		return usagef("--log-format is text or json")
	}
	if err := checkLimits(); err != nil {
		return err
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	beyond, err := checkListen(*listen, token, *certFile != "", *insecure)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(handler)
	opts.Dir, opts.Token, opts.Logger = *dir, token, log
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
	opts.RegistryVersion = observer.StoredVersion // each commit timestamp carries the registry re-read
	srv, err := server.Open(ctx, opts)
	if err != nil {
		_ = lis.Close()
		return err
	}
	var mlis net.Listener
	if *metrics != "" {
		if mlis, err = net.Listen("tcp", *metrics); err != nil {
			_ = lis.Close()
			srv.Kill()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(mlis) }()
		defer hs.Close()
		log.Info("serving metrics", "addr", mlis.Addr().String())
	}
	if beyond && opts.TLS == nil {
		log.Warn("serving beyond loopback without TLS (--insecure): the token and every request and reply cross the network in clear; "+
			"anyone who can see the traffic can take the token and read and write the whole store", "addr", lis.Addr().String())
	}
	log.Info("serving", "addr", lis.Addr().String(), "dir", *dir, "tls", opts.TLS != nil, "token", token != "")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done: // the store failed
		_ = srv.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}
	log.Info("draining calls in flight", "cause", context.Cause(ctx))
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	err = errors.Join(srv.Shutdown(sctx), <-done)
	if err != nil {
		return err
	}
	log.Info("stopped")
	return errDrained
}

// limitFlags registers serve's --max-* flags, which set opts's limits
// (their defaults the server's), and returns the check of their values.
func limitFlags(fs *flag.FlagSet, opts *server.Options) (check func() error) {
	limits := []struct {
		field *int
		name  string
		def   int
		help  string
	}{
		{&opts.MaxSessions, "max-sessions", server.DefaultMaxSessions, "live liveness sessions of all clients (each client process holds one)"},
		{&opts.MaxSessionsPerOwner, "max-sessions-per-owner", server.DefaultMaxSessionsPerOwner, "live sessions of one owner (one client process)"},
		{&opts.MaxLocks, "max-locks", server.DefaultMaxLocks, "advisory locks held by all sessions"},
		{&opts.MaxLocksPerSession, "max-locks-per-session", server.DefaultMaxLocksPerSession, "advisory locks one session holds (an observer scanner holds one at a time)"},
		{&opts.MaxNonceGroups, "max-nonce-groups", server.DefaultMaxNonceGroups, "nonce groups known (one per database a client process opens, each kept 30 minutes after its last call)"},
		{&opts.MaxNonceCalls, "max-nonce-calls", server.DefaultMaxNonceCalls, "calls the nonce table holds for all clients"},
		{&opts.MaxNonceCallsPerGroup, "max-nonce-calls-per-group", server.DefaultMaxNonceCallsPerGroup, "calls the nonce table holds for one client (about its calls in flight)"},
	}
	for _, l := range limits {
		fs.IntVar(l.field, l.name, l.def, "at most this many "+l.help+"; a client past it is refused, what is held goes on; negative: no limit")
	}
	return func() error {
		for _, l := range limits {
			if *l.field == 0 {
				return usagef("--%s must be at least 1 (negative: no limit)", l.name)
			}
		}
		return nil
	}
}

// checkListen refuses a listen address beyond loopback without a token,
// and without TLS unless insecure: the token would cross the network in
// clear. It reports whether the address is beyond loopback.
func checkListen(listen, token string, hasTLS, insecure bool) (beyond bool, err error) {
	if beyond, err = beyondLoopback(listen); err != nil {
		return false, err
	}
	switch {
	case beyond && token == "":
		return true, usagef("--listen %s is not a loopback address: set a token (--token-file or PERCOLATOR_TOKEN) to serve beyond this machine", listen)
	case beyond && !hasTLS && !insecure:
		return true, usagef("--listen %s is not a loopback address: without TLS the token would cross the network in clear; "+
			"serve TLS with --tls-cert and --tls-key, or pass --insecure to accept the risk", listen)
	}
	return beyond, nil
}

// requireLoopback refuses a listen address other than loopback: without a
// token, anyone who can reach the port could read and write everything.
func requireLoopback(addr string) error {
	beyond, err := beyondLoopback(addr)
	if err == nil && beyond {
		err = usagef("--listen %s is not a loopback address: set a token (--token-file or PERCOLATOR_TOKEN) to serve beyond this machine", addr)
	}
	return err
}

// beyondLoopback reports whether a listen address may be reached from
// other machines: anything but localhost and a loopback IP (an empty host
// listens on every interface).
func beyondLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usagef("--listen %s: %v", addr, err)
	}
	if host == "localhost" {
		return false, nil
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback(), nil
}
