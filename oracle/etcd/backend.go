package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
)

// ErrNoOracle means no elected oracle answered: none is elected, or the
// elected one could not be reached, within the budget.
var ErrNoOracle = errors.New("etcd: no elected timestamp oracle answered")

// LeaderAddr returns the address of the elected oracle under prefix (""
// means DefaultOraclePrefix): the value of the election's first-created
// key, as concurrency.Election.Leader reads it. The candidate it names may
// still be opening its term, or may have just lost it; it then answers
// Unavailable, and the caller asks again. No key: ErrNoOracle.
func LeaderAddr(ctx context.Context, cli *clientv3.Client, prefix string) (string, error) {
	if prefix == "" {
		prefix = DefaultOraclePrefix
	}
	resp, err := cli.Get(ctx, electionPrefix(prefix)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("etcd: reading the oracle election: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("%w: no candidate under %s (start one: percolator oracle)", ErrNoOracle, electionPrefix(prefix))
	}
	return string(resp.Kvs[0].Value), nil
}

// OracleBackendOptions configures NewOracleBackend. The zero value is
// usable.
type OracleBackendOptions struct {
	// Prefix is the election's key prefix. Default DefaultOraclePrefix.
	Prefix string
	// Budget bounds one Allocate: how long it keeps resolving the leader
	// and retrying before it fails with ErrNoOracle. It should exceed the
	// candidates' lease, which bounds a failover. Default 10s.
	Budget time.Duration
	// AttemptTimeout bounds one attempt on one leader (dialing it, or one
	// request): a leader that hangs (paused) costs this much before the
	// leader is resolved again. Default 1s.
	AttemptTimeout time.Duration
	// Dial gives the oracle servers' token and TLS. Its timeouts and retry
	// budget are replaced: one attempt of AttemptTimeout per resolution.
	Dial rpc.DialOptions
	// Logger receives leader changes. Default slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills in zero fields with their defaults.
func (o *OracleBackendOptions) EnsureDefaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultOraclePrefix
	}
	if o.Budget == 0 {
		o.Budget = 10 * time.Second
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Dial.DialTimeout, o.Dial.CallTimeout = o.AttemptTimeout, o.AttemptTimeout
	o.Dial.RetryBudget = time.Nanosecond // one attempt: Allocate retries
}

// Validate reports whether the options are usable, after EnsureDefaults.
func (o *OracleBackendOptions) Validate() error {
	if o.Budget < 0 || o.AttemptTimeout < 0 {
		return fmt.Errorf("%w: negative Budget %v or AttemptTimeout %v", oracle.ErrInvalidArgument, o.Budget, o.AttemptTimeout)
	}
	return nil
}

// OracleBackend is an oracle.Backend that finds the elected oracle through
// etcd and allocates from it over gRPC (oracle/remote). On Unavailable
// (the server is not the leader, or is shutting down) or a failed
// connection it resolves the leader again and retries, within the budget.
// Wrap it in an oracle.Client.
//
// It is an oracle.VersionedBackend whose every reply says whether it
// carries a version (invariant 7): an oracle run with the store
// (`percolator oracle --bigtable`) returns the observer registry version
// read after allocating, one without returns none, and a committer then
// reads the registry itself.
//
// Concurrency: safe for concurrent use; mu serializes requests (the
// oracle.Client sends one at a time anyway) and guards the connection.
type OracleBackend struct {
	cli  *clientv3.Client
	opts OracleBackendOptions

	mu struct {
		sync.Mutex
		addr   string          // the leader last resolved
		conn   *rpc.Conn       // to addr, or nil
		be     *remote.Backend // on conn, or nil
		closed bool
	}
}

var _ oracle.VersionedBackend = (*OracleBackend)(nil)

// NewOracleBackend returns a backend that resolves the leader on cli,
// which the caller owns and closes after Close.
func NewOracleBackend(cli *clientv3.Client, opts OracleBackendOptions) (*OracleBackend, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &OracleBackend{cli: cli, opts: opts}, nil
}

// Allocate implements oracle.Backend. Errors: ErrNoOracle (wrapping the
// last failure) when the budget ran out, a non-retryable failure (a
// refused token, a bad count) at once, or ctx's error.
func (b *OracleBackend) Allocate(ctx context.Context, n int) (uint64, error) {
	first, _, _, err := b.AllocateVersioned(ctx, n)
	return first, err
}

// AllocateVersioned implements oracle.VersionedBackend: Allocate, with the
// observer registry version the answering oracle read after allocating,
// if it read one (ok). Errors as Allocate's.
func (b *OracleBackend) AllocateVersioned(ctx context.Context, n int) (first, version uint64, ok bool, err error) {
	if n < 1 {
		return 0, 0, false, fmt.Errorf("%w: allocate %d timestamps", oracle.ErrInvalidArgument, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return 0, 0, false, fmt.Errorf("%w: the oracle backend is closed", oracle.ErrClosed)
	}
	deadline := time.Now().Add(b.opts.Budget)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		first, version, ok, err := b.attemptLocked(ctx, n)
		switch {
		case err == nil:
			return first, version, ok, nil
		case ctx.Err() != nil:
			return 0, 0, false, ctx.Err()
		case !retryable(err):
			return 0, 0, false, err
		case !time.Now().Before(deadline) && errors.Is(err, ErrNoOracle): // said once
			return 0, 0, false, fmt.Errorf("%w within %v: %s", ErrNoOracle, b.opts.Budget, strings.TrimPrefix(err.Error(), ErrNoOracle.Error()+": "))
		case !time.Now().Before(deadline):
			return 0, 0, false, fmt.Errorf("%w within %v: %w", ErrNoOracle, b.opts.Budget, err)
		}
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, 0, false, ctx.Err()
		}
	}
}

// retryable: anything but a refused token, a bad request, and the
// caller's own context may pass on another attempt, at another leader.
func retryable(err error) bool {
	return !errors.Is(err, rpc.ErrUnauthenticated) && !errors.Is(err, storage.ErrInvalidArgument) &&
		!errors.Is(err, oracle.ErrInvalidArgument)
}

// attemptLocked allocates from the leader, resolving and dialing it first
// if there is no connection; a failure drops the connection, so the next
// attempt resolves again.
func (b *OracleBackend) attemptLocked(ctx context.Context, n int) (first, version uint64, ok bool, err error) {
	if b.mu.be == nil {
		if err := b.connectLocked(ctx); err != nil {
			return 0, 0, false, err
		}
	}
	first, version, ok, err = b.mu.be.AllocateVersioned(ctx, n)
	if err != nil {
		b.dropLocked()
		return 0, 0, false, fmt.Errorf("oracle at %s: %w", b.mu.addr, err)
	}
	return first, version, ok, nil
}

func (b *OracleBackend) connectLocked(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, b.opts.AttemptTimeout)
	addr, err := LeaderAddr(rctx, b.cli, b.opts.Prefix)
	cancel()
	if err != nil {
		return err
	}
	conn, err := rpc.Dial(ctx, addr, b.opts.Dial)
	if err != nil {
		return err
	}
	if addr != b.mu.addr {
		b.opts.Logger.Info("oracle: using the elected oracle", "addr", addr, "previous", b.mu.addr)
	}
	b.mu.addr, b.mu.conn, b.mu.be = addr, conn, remote.New(conn)
	return nil
}

func (b *OracleBackend) dropLocked() {
	if b.mu.be != nil {
		b.mu.be.Close()
		_ = b.mu.conn.Close()
	}
	b.mu.conn, b.mu.be = nil, nil
}

// Close closes the connection; later Allocate calls fail with
// oracle.ErrClosed. It waits for a request in flight.
func (b *OracleBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.closed = true
	b.dropLocked()
	return nil
}
