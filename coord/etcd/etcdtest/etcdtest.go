// Package etcdtest runs real single-member etcd clusters for tests and
// hands out clients to them:
//
//   - Start runs a member inside the test's process
//     (coord/etcd.StartEmbedded); it lives until the test ends.
//   - StartProcess runs one in a child process (the test binary re-run;
//     the package's TestMain calls RunMemberIfChild) that the test can
//     kill with SIGKILL, stop with SIGTERM, restart on the same data and
//     ports, and pause and resume with SIGSTOP and SIGCONT. The child dies
//     with the test process however that ends.
//   - RevokeLeaseOf revokes the lease a key is attached to, from outside
//     its owner: what etcd does when a session's lease expires.
//
// Put a faultproxy (internal/faultproxy) between a client and a member's
// ClientAddr to cut, blackhole or delay the connection as well.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/seed-992972ee/percolator/coord/etcd"
)

// Start starts an embedded etcd member in a temporary directory and stops
// it when the test ends.
func Start(t testing.TB) *etcd.Embedded {
	t.Helper()
	m, err := etcd.StartEmbedded(context.Background(), etcd.EmbedOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// Client returns a client of m, closed when the test ends.
func Client(t testing.TB, m *etcd.Embedded) *clientv3.Client {
	t.Helper()
	return ClientAt(t, m.Endpoints()...)
}

// ClientAt returns a client of the given endpoints (URLs, e.g.
// "http://"+proxy.Addr()), closed when the test ends. It does not wait
// for a connection.
func ClientAt(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ErrNoLease: RevokeLeaseOf found no such key, or a key without a lease.
var ErrNoLease = errors.New("etcdtest: the key has no lease")

// RevokeLeaseOf revokes the lease key is attached to, through cli, and
// returns its ID: every key under that lease is deleted and its owner's
// keep-alives fail from then on, as when etcd expires the lease. It
// returns ErrNoLease if key does not exist or has no lease.
func RevokeLeaseOf(ctx context.Context, cli *clientv3.Client, key string) (clientv3.LeaseID, error) {
	r, err := cli.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("etcdtest: get %q: %w", key, err)
	}
	if len(r.Kvs) == 0 || r.Kvs[0].Lease == 0 {
		return 0, fmt.Errorf("%w: %q", ErrNoLease, key)
	}
	id := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, id); err != nil {
		return 0, fmt.Errorf("etcdtest: revoke lease %x of %q: %w", int64(id), key, err)
	}
	return id, nil
}

func nopLogger() *zap.Logger { return zap.NewNop() }
