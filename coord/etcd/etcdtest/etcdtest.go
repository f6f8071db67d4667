// Package etcdtest starts a real, single-member etcd in the test's process
// (coord/etcd.StartEmbedded) and hands out clients to it.
package etcdtest

import (
	"context"
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
	c, err := clientv3.New(clientv3.Config{Endpoints: m.Endpoints(), DialTimeout: 5 * time.Second, Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func nopLogger() *zap.Logger { return zap.NewNop() }
