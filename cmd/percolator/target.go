package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// target is where a command's database is: an embedded store (--dir), a
// server (--server, with its token and CA), or Bigtable with etcd
// (--bigtable, --etcd).
type target struct {
	dir, server, tokenFile, tlsCA string
	bigtable, etcd, etcdPrefix    string
	// sessionTTL is the lease of the process's liveness session with the
	// server or etcd; 0 for the default.
	sessionTTL time.Duration
	// retryBudget is how long an operation retries a server that does
	// not answer (percolator.Options.RetryBudget); 0 for the default.
	retryBudget time.Duration

	cluster *cluster.DB // the last database open opened on Bigtable
}

// register adds --dir (described by dirUsage), --server, --token-file and
// --tls-ca to fs.
func (t *target) register(fs *pflag.FlagSet, dirUsage string) {
	fs.StringVar(&t.dir, "dir", "", dirUsage)
	fs.StringVar(&t.server, "server", "", "address of a percolator server (percolator serve), instead of --dir")
	fs.StringVar(&t.tokenFile, "token-file", "", "file holding the server's token (default: $PERCOLATOR_TOKEN)")
	fs.StringVar(&t.tlsCA, "tls-ca", "", "CA certificate (PEM) to verify the server's TLS certificate with")
	fs.DurationVar(&t.retryBudget, "retry-budget", 0, "with --server: how long an operation (a transaction, a read, opening) goes on retrying a server that does not answer before the command fails naming it; with --etcd: how long opening waits for etcd (default 30s)")
	t.registerCluster(fs)
}

// registerCluster adds --bigtable, --etcd, --etcd-prefix and
// --session-ttl to fs.
func (t *target) registerCluster(fs *pflag.FlagSet) {
	fs.StringVar(&t.bigtable, "bigtable", "", "Cloud Bigtable table PROJECT/INSTANCE/TABLE (with --etcd), instead of --dir (BIGTABLE_EMULATOR_HOST is honoured)")
	fs.StringVar(&t.etcd, "etcd", "", "etcd endpoints, comma-separated (with --bigtable): liveness, advisory locks, and the elected oracle (percolator oracle)")
	fs.StringVar(&t.etcdPrefix, "etcd-prefix", "", "root of percolator's etcd keys (default percolator/)")
	fs.DurationVar(&t.sessionTTL, "session-ttl", 0, "lease of this process's liveness session with --server or --etcd: stopped, it is seen dead and its locks resolved about this long after; with --etcd whole seconds, at least 2s (default 10s)")
}

// validate requires exactly one of --dir, --server and --bigtable (with
// --etcd).
func (t *target) validate() error {
	n := 0
	for _, s := range []string{t.dir, t.server, t.bigtable} {
		if s != "" {
			n++
		}
	}
	switch {
	case n > 1:
		return usagef("--dir, --server and --bigtable exclude each other")
	case n == 0:
		return usagef("--dir, --server or --bigtable is required")
	case t.dir != "" && (t.tokenFile != "" || t.tlsCA != ""):
		return usagef("--token-file and --tls-ca need --server or --bigtable")
	case t.retryBudget < 0:
		return usagef("--retry-budget must be positive")
	case t.retryBudget != 0 && t.server == "" && t.etcd == "":
		return usagef("--retry-budget needs --server or --etcd")
	case (t.bigtable == "") != (t.etcd == ""):
		return usagef("--bigtable and --etcd go together")
	case t.etcdPrefix != "" && t.etcd == "":
		return usagef("--etcd-prefix needs --etcd")
	case t.sessionTTL != 0:
		if err := t.validateSessionTTL(); err != nil {
			return err
		}
	}
	if t.bigtable != "" {
		var o bigtable.Options
		if err := o.ParseTable(t.bigtable); err != nil {
			return usagef("--bigtable: %v", err)
		}
	}
	return nil
}

// validateSessionTTL refuses a --session-ttl the target's session would:
// none on an embedded store, and etcd's leases are whole seconds of at
// least etcd.MinTTL (a server checks its own bounds).
func (t *target) validateSessionTTL() error {
	switch {
	case t.dir != "":
		return usagef("--session-ttl needs --server or --etcd")
	case t.sessionTTL < 0:
		return usagef("--session-ttl must be positive")
	case t.etcd != "":
		o := etcd.SessionOptions{Owner: "-", TTL: t.sessionTTL}
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			return usagef("--session-ttl: %v", err)
		}
	}
	return nil
}

// String names the target for messages: the flag to pass again.
func (t *target) String() string {
	if t.bigtable != "" {
		return "--bigtable " + t.bigtable + " --etcd " + t.etcd
	}
	if t.server != "" {
		return "--server " + t.server
	}
	return "--dir " + t.dir
}

// publishDir is where a long-running command publishes its status: the
// database directory, or nowhere for a server.
func (t *target) publishDir() string { return t.dir }

// token reads the token from --token-file or $PERCOLATOR_TOKEN.
func readToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("PERCOLATOR_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", file)
	}
	return tok, nil
}

// open opens the target's database; create allows an embedded store to be
// created (index and bank), otherwise a directory without one fails.
func (t *target) open(ctx context.Context, create bool) (*percolator.DB, error) {
	if t.bigtable != "" {
		tok, err := readToken(t.tokenFile)
		if err != nil {
			return nil, err
		}
		opts := cluster.Options{Etcd: cluster.ParseEndpoints(t.etcd), Prefix: t.etcdPrefix, SessionTTL: t.sessionTTL, OracleToken: tok, OracleCAFile: t.tlsCA,
			DB: percolator.Options{RetryBudget: t.retryBudget}}
		if err := opts.Bigtable.ParseTable(t.bigtable); err != nil {
			return nil, usagef("--bigtable: %v", err)
		}
		db, err := cluster.Open(ctx, opts)
		if err != nil {
			return nil, err
		}
		t.cluster = db
		return db.DB, nil
	}
	if t.server != "" {
		tok, err := readToken(t.tokenFile)
		if err != nil {
			return nil, err
		}
		return percolator.Open(ctx, percolator.Options{Server: t.server, Token: tok, TLSCAFile: t.tlsCA, SessionTTL: t.sessionTTL, RetryBudget: t.retryBudget})
	}
	db, err := percolator.Open(ctx, percolator.Options{Dir: t.dir, MustExist: !create})
	if errors.Is(err, pebble.ErrLocked) {
		hint := ""
		if !create {
			hint = " (only 'percolator status' reads what it publishes while it runs)"
		}
		return nil, fmt.Errorf("%w\n%s%s", err, runstatus.Holder(t.dir), hint)
	}
	return db, err
}

// withDB runs fn on the target's existing database (read commands).
func withDB(ctx context.Context, t *target, fn func(db *percolator.DB) error) error {
	db, err := t.open(ctx, false)
	if err != nil {
		return err
	}
	return errors.Join(fn(db), db.Close())
}
