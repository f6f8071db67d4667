package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/cli"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/statuspage"
	"github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// oracleConfig is what `oracle` was asked for.
type oracleConfig struct {
	endpoints, prefix, table string
	advertise                string
	lease                    time.Duration
	listen                   cli.ListenFlags
	http                     cli.HTTPFlags
	log                      cli.LogFlags

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
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runOracle(c.Context(), &cfg, c.ErrOrStderr()) },
	}
	fs := c.Flags()
	fs.StringVar(&cfg.endpoints, "etcd", "", "etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379); required")
	fs.StringVar(&cfg.prefix, "etcd-prefix", etcd.DefaultOraclePrefix, "prefix of the election's and the mark's etcd keys")
	fs.StringVar(&cfg.table, "bigtable", "", "the deployment's Cloud Bigtable table PROJECT/INSTANCE/TABLE (BIGTABLE_EMULATOR_HOST is honoured), the one the clients use; required: the oracle keeps a copy of its mark there (so etcd restored from an older backup cannot move timestamps back), and its replies carry the table's observer registry version, so committers need not read it")
	fs.StringVar(&cfg.advertise, "advertise", "", "address clients dial, published in etcd (default: the listen address)")
	fs.DurationVar(&cfg.lease, "lease", etcd.DefaultOracleLease, "election lease, whole seconds (etcd raises it to its minimum, about 2s): a dead leader is replaced within about this")
	cfg.listen.Register(fs, "127.0.0.1:7430", "ask for timestamps")
	cfg.http.Register(fs, cli.BeyondListen)
	cfg.log.Register(fs)
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
	if err := cfg.log.Validate(); err != nil {
		return err
	}
	if cfg.table == "" {
		return cli.Usagef("--bigtable is required: the deployment's table, where the oracle keeps a copy of its mark")
	}
	if err := cfg.bt.ParseTable(cfg.table); err != nil {
		return cli.Usagef("--bigtable: %v", err)
	}
	if err := cfg.listen.Check(); err != nil {
		return err
	}
	return cfg.listen.CheckHTTP(&cfg.http)
}

// runOracle serves one candidate (cluster.ServeOracle) until a signal.
func runOracle(ctx context.Context, cfg *oracleConfig, stderr io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.log.Logger(stderr)
	if cfg.listen.Beyond && cfg.listen.TLS == nil {
		log.Warn("serving beyond loopback without TLS (--insecure): the token and every request and reply cross the network in clear", "listen", cfg.listen.Addr)
	}
	lis, err := net.Listen("tcp", cfg.listen.Addr)
	if err != nil {
		return err
	}
	defer lis.Close()
	addr, err := advertised(cfg.advertise, lis.Addr().String())
	if err != nil {
		return err
	}
	var leading atomic.Pointer[func() bool]
	wake := func() {}
	if cfg.http.Addr != "" {
		page, stop, err := cfg.startHTTP(ctx, addr, &leading, log)
		if err != nil {
			return err
		}
		defer stop()
		wake = page.Wake
	}
	err = cluster.ServeOracle(ctx, cluster.OracleOptions{Etcd: cfg.eps, Prefix: cfg.prefix, Lease: cfg.lease, Bigtable: cfg.bt,
		Listener: lis, Advertise: addr, Server: server.OracleOptions{Token: cfg.listen.Token, Logger: log, TLS: cfg.listen.TLS},
		Standing: func(f func() bool) { leading.Store(&f); wake() }})
	if err != nil {
		return err
	}
	return cli.ErrDrained
}

// startHTTP serves the candidate's status page and metrics on --http:
// whether it leads, once it stands (the page's Wake samples at once),
// sampled every second.
func (cfg *oracleConfig) startHTTP(ctx context.Context, addr string, leading *atomic.Pointer[func() bool], log *slog.Logger) (*statuspage.Page, func(), error) {
	read := func(context.Context) statuspage.Snapshot {
		f := leading.Load()
		switch {
		case f == nil:
			return statuspage.Snapshot{}
		case (*f)():
			return statuspage.Snapshot{Oracle: &statuspage.Oracle{Leader: "This candidate (" + addr + ") leads: it hands out the timestamps."}}
		}
		return statuspage.Snapshot{Oracle: &statuspage.Oracle{Leader: "This candidate (" + addr + ") does not lead: it takes over when etcd elects it.", Standby: true}}
	}
	h := statusHTTP{flags: &cfg.http, token: cfg.listen.Token, tls: cfg.listen.TLS, metrics: processMetrics(), log: log}
	// A read is a load of a flag: sampled every second, the page follows
	// leadership closely.
	page, err := statuspage.New(statuspage.Options{Process: "oracle", About: "candidate " + addr + " on etcd " + strings.Join(cfg.eps, ","),
		Read: read, Interval: time.Second})
	if err != nil {
		return nil, nil, err
	}
	stop, err := h.serve(ctx, page, nil)
	return page, stop, err
}

// oracleFlagsValid checks oracle's etcd flags and returns the endpoints.
func oracleFlagsValid(endpoints, prefix string, lease time.Duration) ([]string, error) {
	switch {
	case strings.TrimSpace(endpoints) == "":
		return nil, cli.Usagef("--etcd is required: the etcd cluster's endpoints, comma-separated")
	case prefix == "":
		return nil, cli.Usagef("--etcd-prefix must not be empty")
	case lease < time.Second || lease > time.Hour || lease%time.Second != 0:
		return nil, cli.Usagef("--lease %v: etcd leases are whole seconds, from 1s to 1h", lease)
	}
	var eps []string
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e == "" {
			return nil, cli.Usagef("--etcd %q has an empty endpoint", endpoints)
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
			return "", cli.Usagef("--advertise %s: %v", flagValue, err)
		}
		return flagValue, nil
	}
	host, _, err := net.SplitHostPort(listening)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", cli.Usagef("listening on %s: give --advertise, the address clients dial", listening)
	}
	return listening, nil
}
