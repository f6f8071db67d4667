package etcdtest

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RevokeLeaseOf deletes every key under the key's lease; a key without a
// lease, or none, is ErrNoLease.
func TestRevokeLeaseOf(t *testing.T) {
	cli := Client(t, Start(t))
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := cli.Put(ctx, k, "x", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, "plain", "x"); err != nil {
		t.Fatal(err)
	}
	id, err := RevokeLeaseOf(ctx, cli, "a")
	if err != nil || id != lease.ID {
		t.Fatalf("RevokeLeaseOf = %x, %v; want %x", id, err, lease.ID)
	}
	r, err := cli.Get(ctx, "", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Key) != "plain" {
		t.Fatalf("after the revoke: %v, %v; want only the key without a lease", r.Kvs, err)
	}
	for _, k := range []string{"plain", "a", "missing"} {
		if _, err := RevokeLeaseOf(ctx, cli, k); !errors.Is(err, ErrNoLease) {
			t.Errorf("RevokeLeaseOf(%q): %v, want ErrNoLease", k, err)
		}
	}
}
