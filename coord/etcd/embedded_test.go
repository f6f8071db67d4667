package etcd_test

import (
	"context"
	"testing"

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
