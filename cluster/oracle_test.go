package cluster_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
)

// TestServeOracle: a candidate ServeOracle runs leads, a DB commits with
// its timestamps, and when its context ends it resigns, drains and
// returns nil.
func TestServeOracle(t *testing.T) {
	ctx := context.Background()
	emu := bttesting.Start(t)
	bt := bttesting.Options(t, emu, "serveoracle")
	if err := bigtable.Init(ctx, bt); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.Start(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	octx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- cluster.ServeOracle(octx, cluster.OracleOptions{Etcd: m.Endpoints(), Bigtable: bt, Listener: lis, Server: server.OracleOptions{Logger: quiet}})
	}()
	db := env{bt: bt, etcd: m.Endpoints()}.open(t)
	uctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.Update(uctx, func(tx *percolator.Txn) error { return tx.Set("r", "c", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeOracle after its context ended: %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ServeOracle did not return within a minute of its context's end")
	}
}

// TestServeOracleNoEtcd: an etcd that does not answer is an error naming
// it, not a candidate that never leads.
func TestServeOracleNoEtcd(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	dead := lis.Addr().String() // nothing speaks etcd there
	err = cluster.ServeOracle(context.Background(), cluster.OracleOptions{Etcd: []string{dead}, Listener: lis, Server: server.OracleOptions{Logger: quiet}})
	if err == nil || !strings.Contains(err.Error(), "etcd "+dead) {
		t.Fatalf("ServeOracle on a dead etcd: %v, want an error naming it", err)
	}
}

// TestStartDev: the dev deployment's table answers on its emulator and
// its etcd member answers, until Close.
func TestStartDev(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := cluster.StartDev(ctx, cluster.DevOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	st, err := bigtable.Open(ctx, d.Bigtable())
	if err != nil {
		t.Fatalf("the dev table: %v", err)
	}
	_ = st.Close()
	cli, err := cluster.Dial(ctx, d.Endpoints())
	if err != nil {
		t.Fatalf("the dev etcd: %v", err)
	}
	_ = cli.Close()
	if !strings.HasPrefix(d.EmulatorAddr(), "127.0.0.1:") {
		t.Fatalf("emulator at %s, want loopback", d.EmulatorAddr())
	}
}
