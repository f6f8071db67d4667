package etcd_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/internal/loopback"

	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
)

// TestEmbedded: the embedded member serves reads and writes.
func TestEmbedded(t *testing.T) {
	m := etcdtest.Start(t)
	c := etcdtest.Client(t, m)
	ctx := context.Background()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("got %v", r.Kvs)
	}
}

// TestEmbeddedPortTakenMeanwhile: a port picked free that another
// process binds before the member does (parallel test packages race
// for ports) makes the member start again on new ports, not fail.
func TestEmbeddedPortTakenMeanwhile(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var picks atomic.Int32
	etcd.SetFreeAddr(t, func() (string, error) {
		if picks.Add(1) == 1 {
			return taken.Addr().String(), nil // the client port, bound meanwhile
		}
		return loopback.FreeAddr()
	})
	m, err := etcd.StartEmbedded(context.Background(), etcd.EmbedOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("a member whose picked port was taken: %v; want it started on new ports", err)
	}
	defer m.Close()
	if ep := m.Endpoints()[0]; strings.Contains(ep, taken.Addr().String()) {
		t.Fatalf("the member serves at %s, the taken port", ep)
	}
	if picks.Load() < 4 {
		t.Fatalf("%d ports picked; want a second pair after the taken one", picks.Load())
	}
	c := etcdtest.Client(t, m)
	if _, err := c.Put(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}

	// Ports the caller names are not replaced.
	_, err = etcd.StartEmbedded(context.Background(), etcd.EmbedOptions{Dir: t.TempDir(), ClientAddr: taken.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("a member on a named port that is taken: %v; want the bind error", err)
	}
}
