package faultproxy

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
)

// newEtcdEnv starts an etcd member, a proxy in front of it and a client
// of the proxy, and writes k=v through it.
func newEtcdEnv(t *testing.T) (*Proxy, *clientv3.Client) {
	t.Helper()
	m := etcdtest.Start(t)
	p := newProxy(t, strings.TrimPrefix(m.Endpoints()[0], "http://"))
	cli := etcdtest.ClientAt(t, "http://"+p.Addr())
	if _, err := cli.Put(patient(t), "k", "v"); err != nil {
		t.Fatal(err)
	}
	return p, cli
}

// patient returns a context for a call that must succeed; its deadline
// only bounds a hang.
func patient(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), patientTimeout)
	t.Cleanup(cancel)
	return ctx
}

func expectValue(t *testing.T, cli *clientv3.Client, key, want string) {
	t.Helper()
	r, err := cli.Get(patient(t), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
		t.Fatalf("Get %s = %v, want %q", key, r.Kvs, want)
	}
}

func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

// A call on a blackholed connection times out, the connection stays
// open, and after Resume it serves again.
func TestEtcdBlackholeTimesOut(t *testing.T) {
	p, cli := newEtcdEnv(t)
	c := waitConns(t, p, 1)[0]
	c.Blackhole()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := cli.Get(ctx, "k"); !isDeadline(err) {
		t.Fatalf("Get through a blackhole: %v, want a deadline error", err)
	}
	c.Resume()
	expectValue(t, cli, "k", "v")
	if conns := p.Conns(); len(conns) != 1 || conns[0] != c {
		t.Fatalf("after Resume: Conns() = %v, want the same connection", conns)
	}
}

// A cut connection is replaced: the client reconnects by itself.
func TestEtcdCutReconnects(t *testing.T) {
	p, cli := newEtcdEnv(t)
	c := waitConns(t, p, 1)[0]
	c.Cut()
	expectValue(t, cli, "k", "v")
	if conns := p.Conns(); len(conns) != 1 || conns[0].ID() <= c.ID() {
		t.Fatalf("after the cut: Conns() = %v, want one new connection", conns)
	}
}

// Latency slows each call by at least a round trip and breaks none.
func TestEtcdDelaySlows(t *testing.T) {
	p, cli := newEtcdEnv(t)
	const d = 50 * time.Millisecond
	if err := p.SetDelay(BothWays, Fixed(d)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if _, err := cli.Put(patient(t), "k", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		expectValue(t, cli, "k", strconv.Itoa(i))
		if el := time.Since(start); el < 4*d {
			t.Fatalf("a Put and a Get took %v through %v each way", el, d)
		}
	}
}

// Through a nemesis, a writer's acknowledged writes survive: after it,
// the key holds the last acknowledged value or one attempted after it
// (a write whose reply was lost may have been applied).
func TestEtcdNemesis(t *testing.T) {
	p, cli := newEtcdEnv(t)
	n, err := StartNemesis(NemesisOptions{
		Seed: 4, Duration: time.Second, CutRate: 4, BlackholeRate: 4, DelayRate: 4,
		MaxBlackhole: 300 * time.Millisecond, MaxDelayFor: 300 * time.Millisecond, MaxLatency: 20 * time.Millisecond,
		Logf: t.Logf,
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	acked, attempted := -1, -1
	for i := 0; ; i++ {
		select {
		case <-n.Done():
		default:
			attempted = i
			ctx, cancel := context.WithTimeout(t.Context(), heldTimeout)
			if _, err := cli.Put(ctx, "k", strconv.Itoa(i)); err == nil {
				acked = i
			}
			cancel()
			continue
		}
		break
	}
	t.Logf("nemesis: %+v; last acknowledged write %d of %d", n.Stop(), acked, attempted)
	r, err := cli.Get(patient(t), "k")
	if err != nil {
		t.Fatalf("Get after the nemesis: %v", err)
	}
	got, err := -1, error(nil) // "v": the write before the first attempt
	if v := string(r.Kvs[0].Value); v != "v" {
		got, err = strconv.Atoi(v)
	}
	if err != nil || got < acked || got > attempted {
		t.Fatalf("after the nemesis k = %s; want a write from %d (last acknowledged) to %d (last attempted)", r.Kvs[0].Value, acked, attempted)
	}
}

// faultSuiteEnv enables the long fault tests.
const faultSuiteEnv = "PERCOLATOR_FAULT_SUITE"

// Only a keepalive rescues a call with a long deadline from a blackholed
// connection: gRPC's client pings no more often than every 10s, and when
// the ping goes unanswered it closes the transport; etcd's client then
// retries the call on a new connection. The blackholed one stays open.
func TestFaultSuiteEtcdKeepaliveNoticesBlackhole(t *testing.T) {
	if os.Getenv(faultSuiteEnv) == "" {
		t.Skipf("waits out a 10s keepalive; set %s=1 to run it", faultSuiteEnv)
	}
	m := etcdtest.Start(t)
	p := newProxy(t, strings.TrimPrefix(m.Endpoints()[0], "http://"))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + p.Addr()},
		DialTimeout: 5 * time.Second, DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		PermitWithoutStream: true, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if _, err := cli.Put(patient(t), "k", "v"); err != nil {
		t.Fatal(err)
	}
	held := waitConns(t, p, 1)[0]
	held.Blackhole()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := cli.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("Get with a long deadline through a blackhole: %v, %v", r, err)
	}
	t.Logf("the keepalive noticed the blackhole; the call succeeded after %v", time.Since(start))
	select {
	case <-held.Done():
		t.Fatal("the proxy closed the blackholed connection")
	default:
	}
	if conns := p.Conns(); len(conns) != 2 || conns[0] != held {
		t.Fatalf("Conns() = %v, want the blackholed one and a new one", conns)
	}
}
