package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
)

// Sessions on a real, embedded etcd, with etcd's shortest lease so that
// expiry happens within a test.

const ttl = etcd.MinTTL

var ctx = context.Background()

var quiet = slog.New(slog.DiscardHandler)

// TestMain fails the package if a Session goroutine (renew loop, watcher)
// outlives its Close: every test closes its sessions in a cleanup.
func TestMain(m *testing.M) {
	etcdtest.RunMemberIfChild() // a test's etcd in a process of its own
	code := m.Run()
	if code == 0 {
		if stack := sessionGoroutines(); stack != "" {
			os.Stderr.WriteString("goroutine leak: Session goroutines left after every Close:\n" + stack)
			code = 1
		}
	}
	os.Exit(code)
}

// sessionGoroutines returns the stacks of the goroutines running Session
// code, waiting a little for those about to exit.
func sessionGoroutines() string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "coord/etcd.(*Session)") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func open(t *testing.T, cli *clientv3.Client, owner string) *etcd.Session {
	t.Helper()
	return openOpts(t, cli, etcd.SessionOptions{Owner: owner, TTL: ttl, Logger: quiet})
}

func openOpts(t *testing.T, cli *clientv3.Client, opts etcd.SessionOptions) *etcd.Session {
	t.Helper()
	s, err := etcd.Open(ctx, cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func alive(t *testing.T, obs *etcd.Session, owner string) bool {
	t.Helper()
	ok, err := obs.Alive(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func lock(t *testing.T, s *etcd.Session, key string) func() {
	t.Helper()
	unlock, held, err := s.TryLock(ctx, key, s.Owner())
	if err != nil || held {
		t.Fatalf("%s TryLock(%q): held=%v, %v", s.Owner(), key, held, err)
	}
	return unlock
}

func wantHeld(t *testing.T, s *etcd.Session, key string) {
	t.Helper()
	if _, held, err := s.TryLock(ctx, key, s.Owner()); err != nil || !held {
		t.Fatalf("%s TryLock(%q) of a held lock: held=%v, %v", s.Owner(), key, held, err)
	}
}

// TestAliveWhileRenewedDeadAfterClose: an owner is alive and its Check
// passes while its session is renewed, past its lease; it is dead as soon
// as the session is closed, and the closed session refuses every call.
func TestAliveWhileRenewedDeadAfterClose(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	s := open(t, cli, "worker")
	obs := open(t, cli, "observer")
	for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(ttl / 20) {
		if !alive(t, obs, "worker") {
			t.Fatal("a renewed session's owner is reported dead")
		}
		if err := s.Check(); err != nil {
			t.Fatalf("Check of a renewed session: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(t, obs, "worker") {
		t.Fatal("the owner of a closed session is reported alive")
	}
	if err := s.Check(); !errors.Is(err, etcd.ErrSessionLost) || !errors.Is(err, etcd.ErrClosed) {
		t.Fatalf("Check after Close: %v, want ErrSessionLost and ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Alive(ctx, "observer"); !errors.Is(err, etcd.ErrClosed) {
		t.Fatalf("Alive after Close: %v, want ErrClosed", err)
	}
	if _, _, err := s.TryLock(ctx, "k", "worker"); !errors.Is(err, etcd.ErrClosed) {
		t.Fatalf("TryLock after Close: %v, want ErrClosed", err)
	}
	if err := s.Register(ctx, "g", "v"); !errors.Is(err, etcd.ErrClosed) {
		t.Fatalf("Register after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Members(ctx, "g"); !errors.Is(err, etcd.ErrClosed) {
		t.Fatalf("Members after Close: %v, want ErrClosed", err)
	}
	if _, ok := <-s.WatchMembers(ctx, "g"); ok {
		t.Fatal("WatchMembers after Close delivered a list")
	}
}

// TestDeadAfterLeaseExpires: a process that stops renewing is alive until
// its lease runs out, then dead within about a second more; by then its
// own Check fails already (it never passes while others see it dead), and
// its locks are free.
func TestDeadAfterLeaseExpires(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	s := open(t, cli, "worker")
	obs := open(t, cli, "observer")
	unlock := lock(t, s, "k")
	defer unlock()
	wantHeld(t, obs, "k")

	etcd.PauseRenewals(s, true)
	if !alive(t, obs, "worker") {
		t.Fatal("dead at once, before its lease ran out")
	}
	took := waitFor(t, "the owner that stopped renewing is dead", func() bool {
		dead := !alive(t, obs, "worker")
		if err := s.Check(); dead && err == nil {
			t.Fatal("the owner is seen dead while its own Check passes")
		}
		return dead
	})
	t.Logf("dead %v after the renewals stopped (lease %v)", took, ttl)
	if took > ttl+1500*time.Millisecond {
		t.Errorf("dead only %v after the renewals stopped, lease %v", took, ttl)
	}
	if err := s.Check(); !errors.Is(err, etcd.ErrSessionLost) {
		t.Fatalf("Check of an expired session: %v, want ErrSessionLost", err)
	}
	lock(t, obs, "k")()
}

// TestCheckFailsAfterPauseAndRecovers: a process paused past its lease
// fails Check and is dead to others, who take its locks; once it runs
// again it gets a new lease, passes Check, is alive again with its
// memberships, and releasing the lock it lost does not release the lock
// another took meanwhile.
func TestCheckFailsAfterPauseAndRecovers(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	s := open(t, cli, "worker")
	obs := open(t, cli, "observer")
	if err := s.Register(ctx, "workers", "w1"); err != nil {
		t.Fatal(err)
	}
	unlockLost := lock(t, s, "k")

	etcd.PauseRenewals(s, true)
	waitFor(t, "the paused process's Check fails", func() bool { return s.Check() != nil })
	if err := s.Check(); !errors.Is(err, etcd.ErrSessionLost) {
		t.Fatalf("Check after the pause: %v, want ErrSessionLost", err)
	}
	waitFor(t, "the paused process is dead", func() bool { return !alive(t, obs, "worker") })
	if m, err := obs.Members(ctx, "workers"); err != nil || len(m) != 0 {
		t.Fatalf("members while the only member's lease is gone: %v, %v", m, err)
	}
	unlockObs := lock(t, obs, "k")
	defer unlockObs()

	etcd.PauseRenewals(s, false)
	waitFor(t, "the resumed process passes Check", func() bool { return s.Check() == nil })
	if !alive(t, obs, "worker") {
		t.Fatal("the resumed process passes Check but is dead")
	}
	m, err := obs.Members(ctx, "workers")
	if err != nil || len(m) != 1 || m[0] != (etcd.Member{Owner: "worker", Value: "w1"}) {
		t.Fatalf("members after the re-grant: %v, %v; want worker=w1", m, err)
	}
	unlockLost()
	wantHeld(t, s, "k")
	unlockObs()
	lock(t, s, "k")()
}

// TestTryLockExclusive: a lock is exclusive between sessions and between
// scanners of one process; it is free again after unlock (idempotent)
// and after its session closes. Keys are bytes.
func TestTryLockExclusive(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	a := open(t, cli, "a")
	b := open(t, cli, "b")
	key := "row\x00\xff/é"

	unlock := lock(t, a, key)
	wantHeld(t, a, key)
	wantHeld(t, b, key)
	resp, err := cli.Get(ctx, etcd.DefaultPrefix+"lock/"+key)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("the lock key in etcd: %v, %v; want one key, value a", resp.Kvs, err)
	}
	unlock()
	unlock()
	unlock = lock(t, b, key)
	wantHeld(t, a, key)
	unlock()
	unlock = lock(t, a, key)
	unlock()

	lock(t, a, "other")
	wantHeld(t, b, "other")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lock(t, b, "other")()
}

// TestTryLockConcurrent: goroutines of two sessions take and release a
// few keys at random; no key is ever held by two at once, and no lock key
// is left in etcd afterwards.
func TestTryLockConcurrent(t *testing.T) {
	m := etcdtest.Start(t)
	sessions := []*etcd.Session{open(t, etcdtest.Client(t, m), "a"), open(t, etcdtest.Client(t, m), "b")}
	seed := testSeed(t)
	const (
		keys       = 3
		goroutines = 6 // per session
		rounds     = 40
	)
	var holder [keys]atomic.Int64 // 0: free; else the holding goroutine + 1
	var taken [2]atomic.Int64
	var wg sync.WaitGroup
	for i := range 2 * goroutines {
		sess := sessions[i%2]
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(seed, uint64(i)))
			owner := sess.Owner() + "/" + strconv.Itoa(i)
			for range rounds {
				k := rnd.IntN(keys)
				unlock, held, err := sess.TryLock(ctx, "k"+strconv.Itoa(k), owner)
				if err != nil {
					t.Error(err)
					return
				}
				if held {
					continue
				}
				if !holder[k].CompareAndSwap(0, int64(i+1)) {
					t.Errorf("key k%d taken by goroutine %d while goroutine %d holds it", k, i, holder[k].Load()-1)
				}
				taken[i%2].Add(1)
				time.Sleep(time.Duration(rnd.IntN(2000)) * time.Microsecond)
				holder[k].Store(0)
				unlock()
			}
		})
	}
	wg.Wait()
	for i := range taken {
		if taken[i].Load() == 0 {
			t.Errorf("session %s never got a lock", sessions[i].Owner())
		}
	}
	left, err := etcdtest.Client(t, m).Get(ctx, etcd.DefaultPrefix+"lock/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || left.Count != 0 {
		t.Fatalf("lock keys left after every unlock: %d, %v", left.Count, err)
	}
}

// testSeed returns a seed from ETCD_TEST_SEED, or from the clock, and
// logs it so a failure can be replayed (as far as the scheduler allows).
func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ETCD_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ETCD_TEST_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with ETCD_TEST_SEED=%d)", seed, seed)
	return seed
}

// TestBadInput: bad options are refused with ErrInvalidArgument before
// anything is written (no lease, no key); so are a bad group and an empty
// owner.
func TestBadInput(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	for _, o := range []etcd.SessionOptions{
		{},
		{TTL: ttl},
		{Owner: "w", TTL: -time.Second},
		{Owner: "w", TTL: time.Second},
		{Owner: "w", TTL: 2500 * time.Millisecond},
		{Owner: "w", TTL: ttl, Prefix: "db1"},
	} {
		if _, err := etcd.Open(ctx, cli, o); !errors.Is(err, etcd.ErrInvalidArgument) {
			t.Errorf("Open(%+v): %v, want ErrInvalidArgument", o, err)
		}
	}
	if _, err := etcd.Open(ctx, nil, etcd.SessionOptions{Owner: "w"}); !errors.Is(err, etcd.ErrInvalidArgument) {
		t.Errorf("Open with a nil client: %v, want ErrInvalidArgument", err)
	}
	leases, err := cli.Leases(ctx)
	if err != nil || len(leases.Leases) != 0 {
		t.Fatalf("leases after refused opens: %v, %v", leases.Leases, err)
	}
	keys, err := cli.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil || keys.Count != 0 {
		t.Fatalf("keys after refused opens: %d, %v", keys.Count, err)
	}

	s := open(t, cli, "w")
	for _, g := range []string{"", "a/b", "/"} {
		if err := s.Register(ctx, g, "v"); !errors.Is(err, etcd.ErrInvalidArgument) {
			t.Errorf("Register(%q): %v, want ErrInvalidArgument", g, err)
		}
		if _, err := s.Members(ctx, g); !errors.Is(err, etcd.ErrInvalidArgument) {
			t.Errorf("Members(%q): %v, want ErrInvalidArgument", g, err)
		}
		if _, ok := <-s.WatchMembers(ctx, g); ok {
			t.Errorf("WatchMembers(%q) delivered a list", g)
		}
	}
	if _, err := s.Alive(ctx, ""); !errors.Is(err, etcd.ErrInvalidArgument) {
		t.Errorf("Alive of the empty owner: %v, want ErrInvalidArgument", err)
	}
}

// TestPrefixesAreSeparate: sessions of two databases sharing one etcd
// write only under their prefixes and see nothing of each other.
func TestPrefixesAreSeparate(t *testing.T) {
	cli := etcdtest.Client(t, etcdtest.Start(t))
	a := openOpts(t, cli, etcd.SessionOptions{Owner: "a", TTL: ttl, Prefix: "db1/", Logger: quiet})
	b := openOpts(t, cli, etcd.SessionOptions{Owner: "b", TTL: ttl, Prefix: "db2/", Logger: quiet})
	lock(t, a, "k")
	lock(t, b, "k")
	for _, s := range []*etcd.Session{a, b} {
		if err := s.Register(ctx, "workers", s.Owner()); err != nil {
			t.Fatal(err)
		}
	}
	if alive(t, a, "b") || alive(t, b, "a") {
		t.Fatal("an owner of one prefix is alive under the other")
	}
	if m, err := a.Members(ctx, "workers"); err != nil || len(m) != 1 || m[0].Owner != "a" {
		t.Fatalf("db1's members: %v, %v; want a alone", m, err)
	}
	resp, err := cli.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 6 {
		t.Errorf("%d keys, want 6 (live, lock, member for each)", len(resp.Kvs))
	}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); !strings.HasPrefix(k, "db1/") && !strings.HasPrefix(k, "db2/") {
			t.Errorf("key %q outside both prefixes", k)
		}
	}
}
