package etcd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/seed-992972ee/percolator"
	coordetcd "github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
)

var bg = context.Background()

// testLease is the candidates' lease: etcd's embedded member raises any
// shorter one to 2s.
const testLease = 2 * time.Second

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testLog logs to the test when -v is given.
func testLog(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return quietLog()
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// oracleNode is a candidate with its own etcd client, served by the
// oracle role's gRPC server on a loopback port.
type oracleNode struct {
	addr string
	cand *etcd.Candidate
	srv  *server.OracleServer
	cli  *clientv3.Client
}

// startNode starts a candidate on m; opts.Addr is set to its listener.
func startNode(t *testing.T, m *coordetcd.Embedded, opts etcd.CandidateOptions) *oracleNode {
	t.Helper()
	return startNodeToken(t, m, opts, "")
}

// startNodeToken starts a candidate whose server requires token.
func startNodeToken(t *testing.T, m *coordetcd.Embedded, opts etcd.CandidateOptions, token string) *oracleNode {
	t.Helper()
	return startNodeServer(t, m, opts, server.OracleOptions{Token: token})
}

// startNodeServer starts a candidate served with sopts (its Logger is
// opts.Logger).
func startNodeServer(t *testing.T, m *coordetcd.Embedded, opts etcd.CandidateOptions, sopts server.OracleOptions) *oracleNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &oracleNode{addr: lis.Addr().String(), cli: etcdtest.Client(t, m)}
	opts.Addr = n.addr
	if opts.Store == nil {
		opts.Store = storeOf(m)
	}
	if opts.TTL == 0 {
		opts.TTL = testLease
	}
	if opts.Logger == nil {
		opts.Logger = testLog(t)
	}
	if n.cand, err = etcd.StartCandidate(n.cli, opts); err != nil {
		t.Fatal(err)
	}
	sopts.Logger = opts.Logger
	n.srv = server.NewOracleServer(n.cand, sopts)
	done := make(chan struct{})
	go func() { defer close(done); _ = n.srv.Serve(lis) }()
	t.Cleanup(func() { // before the client's cleanup: registered after it
		n.srv.Stop()
		<-done
		_ = n.cand.Close()
	})
	return n
}

// stores holds the deployment store of each etcd member's candidates.
var stores sync.Map // *coordetcd.Embedded → storage.Store

// storeOf is the store the candidates on m share (the deployment's).
func storeOf(m *coordetcd.Embedded) storage.Store {
	st, _ := stores.LoadOrStore(m, memory.New())
	return st.(storage.Store)
}

// waitLeading waits until one of nodes leads and returns it.
func waitLeading(t *testing.T, within time.Duration, nodes ...*oracleNode) *oracleNode {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.cand.Leading() {
				return n
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no candidate leads after %v", within)
	return nil
}

// tsCall is one timestamp a client got, and when it asked and got it.
type tsCall struct {
	start, end time.Time
	ts         uint64
}

// checkIncreasing is DESIGN invariant 1 as clients see it, across clients:
// no timestamp is handed out twice, and a call that began after another
// returned got a greater timestamp.
func checkIncreasing(t *testing.T, calls []tsCall) {
	t.Helper()
	seen := make(map[uint64]bool, len(calls))
	for _, c := range calls {
		if seen[c.ts] {
			t.Fatalf("timestamp %d handed out twice", c.ts)
		}
		seen[c.ts] = true
	}
	byEnd := slices.Clone(calls)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end.Before(byEnd[j].end) })
	prefixMax := make([]uint64, len(byEnd))
	for i, c := range byEnd {
		prefixMax[i] = c.ts
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	for _, c := range calls {
		// The calls that returned before c began.
		k := sort.Search(len(byEnd), func(i int) bool { return !byEnd[i].end.Before(c.start) })
		if k > 0 && prefixMax[k-1] >= c.ts {
			t.Fatalf("a call begun at %v got %d, not above %d returned before it began", c.start.Format(time.StampMicro), c.ts, prefixMax[k-1])
		}
	}
}

// load runs clients oracle clients (each its own OracleBackend, as
// separate processes would have) asking for timestamps until stop.
func load(t *testing.T, m *coordetcd.Embedded, clients int, stop <-chan struct{}) func() []tsCall {
	wait, _ := loadCounting(t, m, clients, stop)
	return wait
}

// loadCounting is load, and also returns how many calls that began after
// a time have returned so far.
func loadCounting(t *testing.T, m *coordetcd.Embedded, clients int, stop <-chan struct{}) (wait func() []tsCall, since func(time.Time) int) {
	var (
		mu    sync.Mutex
		calls []tsCall
		wg    sync.WaitGroup
	)
	for range clients {
		b, err := etcd.NewOracleBackend(etcdtest.Client(t, m), etcd.OracleBackendOptions{Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		oc := oracle.NewClient(b)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					ts, err := oc.Timestamp(bg)
					if err != nil {
						t.Errorf("Timestamp: %v", err)
						return
					}
					mu.Lock()
					calls = append(calls, tsCall{start, time.Now(), ts})
					mu.Unlock()
				}
			}()
		}
		t.Cleanup(func() { _ = b.Close() })
	}
	wait = func() []tsCall {
		wg.Wait()
		return calls
	}
	since = func(from time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range calls {
			if c.start.After(from) {
				n++
			}
		}
		return n
	}
	return wait, since
}

// waitCalls waits until at least n calls that began after from have
// returned: the load's progress, whatever the machine's speed.
func waitCalls(t *testing.T, since func(time.Time) int, from time.Time, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for since(from) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls begun after %v returned in a minute; want %d", since(from), from.Format(time.StampMicro), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOracleFailover: two candidates; clients through the discovery
// backend load the leader; the leader dies (no resignation: its lease
// runs out); the standby takes over and the clients' timestamps stay
// strictly increasing across the failover.
func TestOracleFailover(t *testing.T) {
	m := etcdtest.Start(t)
	a := startNode(t, m, etcd.CandidateOptions{})
	waitLeading(t, 10*time.Second, a)
	b := startNode(t, m, etcd.CandidateOptions{})
	stop := make(chan struct{})
	wait, since := loadCounting(t, m, 3, stop)
	// The load runs on both sides of the kill: some calls returned before
	// it, some asked after it returned (not a fixed pause: a busy machine
	// took longer than one to find the leader).
	waitCalls(t, since, time.Time{}, 20)
	killed := time.Now()
	a.srv.Stop()
	a.cand.Crash()
	waitLeading(t, 3*testLease, b)
	waitCalls(t, since, killed, 20)
	close(stop)
	calls := wait()
	var before, after int
	first := time.Duration(-1)
	for _, c := range calls {
		if c.end.Before(killed) {
			before++
		} else if c.start.After(killed) {
			after++
			if d := c.end.Sub(killed); first < 0 || d < first {
				first = d
			}
		}
	}
	t.Logf("%d timestamps before the kill, %d after; failover (kill to first timestamp asked after it) %v with a %v lease", before, after, first, testLease)
	if before == 0 || after == 0 {
		t.Fatalf("the load did not span the failover: %d before, %d after", before, after)
	}
	checkIncreasing(t, calls)
	if a.cand.Leading() || !b.cand.Leading() {
		t.Fatalf("after the failover: a leads %v, b leads %v", a.cand.Leading(), b.cand.Leading())
	}
}

// pauser blocks a candidate's renewals while paused: a process stopped
// (SIGSTOP, a GC pause) as far as its lease is concerned.
type pauser struct {
	mu sync.Mutex
	ch chan struct{} // non-nil while paused; closed on resume
}

func (p *pauser) hook(ctx context.Context) {
	p.mu.Lock()
	ch := p.ch
	p.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

func (p *pauser) pause() {
	p.mu.Lock()
	p.ch = make(chan struct{})
	p.mu.Unlock()
}

func (p *pauser) resume() {
	p.mu.Lock()
	close(p.ch)
	p.ch = nil
	p.mu.Unlock()
}

// TestOraclePausedLeader: a leader whose renewals stop allocates nothing
// after its lease deadline, though its window has room; once its lease
// expires in etcd the standby leads, above everything the paused one
// handed out; when it resumes it allocates nothing until it wins an
// election again; its stale mark write is refused by the revision
// condition.
func TestOraclePausedLeader(t *testing.T) {
	m := etcdtest.Start(t)
	var p pauser
	opts := etcd.CandidateOptions{}
	etcd.SetBeforeRenew(&opts, p.hook)
	a := startNode(t, m, opts)
	waitLeading(t, 10*time.Second, a)
	b := startNode(t, m, etcd.CandidateOptions{})
	staleWrite := a.cand.TermMarkWriter()

	// a allocates, paused or not, until its deadline; b until it leads.
	p.pause()
	paused := time.Now()
	var aLast, bFirst time.Time
	var aMax, bMin uint64
	for bFirst.IsZero() {
		// A bound for a hang, not for how soon: the standby takes over
		// once the lease expires in etcd, however busy the machine.
		if time.Since(paused) > 15*testLease {
			t.Fatal("the standby did not take over from the paused leader")
		}
		if ts, err := a.cand.Allocate(bg, 1); err == nil {
			aLast, aMax = time.Now(), ts
		} else if !errors.Is(err, oracle.ErrNotLeader) {
			t.Fatalf("the paused leader's refusal: %v; want ErrNotLeader (its window has room)", err)
		}
		if ts, err := b.cand.Allocate(bg, 1); err == nil {
			bFirst, bMin = time.Now(), ts
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("paused leader's last timestamp %v after the pause, standby's first %v after", aLast.Sub(paused), bFirst.Sub(paused))
	if aMax == 0 || !aLast.Before(bFirst) || bMin <= aMax {
		t.Fatalf("paused leader: last %d at %v; standby: first %d at %v", aMax, aLast.Sub(paused), bMin, bFirst.Sub(paused))
	}
	if d := aLast.Sub(paused); d > testLease {
		t.Fatalf("the paused leader allocated %v into its pause, past its lease %v", d, testLease)
	}
	if _, err := a.cand.Allocate(bg, 1); !errors.Is(err, oracle.ErrNotLeader) {
		t.Fatalf("paused leader after the takeover: %v", err)
	}

	// Resumed: it allocates nothing while b leads.
	p.resume()
	for end := time.Now().Add(testLease); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if ts, err := a.cand.Allocate(bg, 1); err == nil {
			t.Fatalf("the resumed leader handed out %d without winning an election", ts)
		}
		if a.cand.Leading() {
			t.Fatal("the resumed leader leads while the standby does")
		}
	}

	// Its stale mark write is refused, and changes nothing.
	before := readMark(t, a.cli)
	if err := staleWrite(before + 1000); !errors.Is(err, oracle.ErrNotLeader) {
		t.Fatalf("a stale leader's mark write: %v; want ErrNotLeader", err)
	}
	if after := readMark(t, a.cli); after != before {
		t.Fatalf("a stale leader's write moved the mark from %d to %d", before, after)
	}

	// b resigns: a wins again and goes on above everything.
	bMax, err := b.cand.Allocate(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.cand.Close()
	waitLeading(t, testLease, a)
	if ts, err := a.cand.Allocate(bg, 1); err != nil || ts <= bMax {
		t.Fatalf("a, elected again: %d, %v; want above %d", ts, err, bMax)
	}
}

func readMark(t *testing.T, cli *clientv3.Client) uint64 {
	t.Helper()
	resp, err := cli.Get(bg, etcd.MarkKey(etcd.DefaultOraclePrefix))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the mark: %v, %v", resp, err)
	}
	var v uint64
	for _, c := range resp.Kvs[0].Value {
		v = v<<8 | uint64(c)
	}
	return v
}

// TestOracleResignHandsOver: Close resigns, so the standby leads at once,
// not after the lease: with a 5s lease the handover takes well under it.
func TestOracleResignHandsOver(t *testing.T) {
	m := etcdtest.Start(t)
	a := startNode(t, m, etcd.CandidateOptions{TTL: 5 * time.Second})
	waitLeading(t, 10*time.Second, a)
	b := startNode(t, m, etcd.CandidateOptions{TTL: 5 * time.Second})
	last, err := a.cand.Allocate(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = a.cand.Close()
	waitLeading(t, 2*time.Second, b)
	t.Logf("handover after resignation: %v", time.Since(start))
	if ts, err := b.cand.Allocate(bg, 1); err != nil || ts <= last {
		t.Fatalf("the new leader: %d, %v; want above %d", ts, err, last)
	}
	if _, err := a.cand.Allocate(bg, 1); !errors.Is(err, oracle.ErrNotLeader) {
		t.Fatalf("the resigned candidate: %v", err)
	}
	_ = b.cand.Close()
	checkNoCandidateGoroutines(t)
}

// checkNoCandidateGoroutines fails if a goroutine of a closed candidate
// (its campaign or a renewal) is still running a few seconds later. The
// embedded etcd's own goroutines make a plain count useless here.
func checkNoCandidateGoroutines(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<22)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "etcd.(*Candidate)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed candidate's goroutine is still running:\n%s", stacks)
		}
	}
}

// TestOracleMark: the mark is 8 bytes big-endian ahead of every timestamp
// handed out; a leader's write below the stored mark leaves it; a corrupt
// mark stops any candidate from leading until it is repaired.
func TestOracleMark(t *testing.T) {
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	if _, err := cli.Put(bg, etcd.MarkKey(etcd.DefaultOraclePrefix), "bad"); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, m, etcd.CandidateOptions{Window: 100})
	time.Sleep(500 * time.Millisecond)
	if _, err := a.cand.Allocate(bg, 1); !errors.Is(err, oracle.ErrNotLeader) || a.cand.Leading() {
		t.Fatalf("a candidate over a corrupt mark: %v; want ErrNotLeader", err)
	}
	if _, err := cli.Put(bg, etcd.MarkKey(etcd.DefaultOraclePrefix), etcd.EncodeMark(5000)); err != nil {
		t.Fatal(err)
	}
	waitLeading(t, 5*time.Second, a)
	first, err := a.cand.Allocate(bg, 1)
	if err != nil || first != 5000 {
		t.Fatalf("resumed at %d, %v; want the stored mark 5000", first, err)
	}
	for range 300 { // 3 windows
		ts, err := a.cand.Allocate(bg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if mark := readMark(t, cli); ts >= mark {
			t.Fatalf("handed out %d with mark %d", ts, mark)
		}
	}
	mark := readMark(t, cli)
	if err := a.cand.TermMarkWriter()(mark - 10); err != nil {
		t.Fatalf("a write below the stored mark: %v (it is durable already)", err)
	}
	if got := readMark(t, cli); got != mark {
		t.Fatalf("the mark went from %d to %d", mark, got)
	}
}

// TestOracleBackendNoLeader: with no candidate, the discovery backend
// gives up after its budget with ErrNoOracle, and no version.
func TestOracleBackendNoLeader(t *testing.T) {
	m := etcdtest.Start(t)
	b, err := etcd.NewOracleBackend(etcdtest.Client(t, m), etcd.OracleBackendOptions{Budget: 300 * time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	_, _, ok, err := oracle.NewClient(b).TimestampVersion(bg)
	if !errors.Is(err, etcd.ErrNoOracle) || ok {
		t.Fatalf("no leader: ok %v, %v; want ErrNoOracle", ok, err)
	}
	if strings.Count(err.Error(), etcd.ErrNoOracle.Error()) != 1 || !strings.Contains(err.Error(), "percolator oracle") {
		t.Fatalf("no leader: %q; want it said once, and what to start", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("gave up after %v; budget 300ms", d)
	}
}

// TestOracleBadInput: options out of range are ErrInvalidArgument.
func TestOracleBadInput(t *testing.T) {
	for _, o := range []etcd.CandidateOptions{
		{},
		{Addr: "127.0.0.1:1", TTL: 1500 * time.Millisecond},
		{Addr: "127.0.0.1:1", TTL: 500 * time.Millisecond},
		{Addr: "127.0.0.1:1", TTL: -time.Second},
		{Addr: "127.0.0.1:1", TTL: 2 * time.Hour},
		{Addr: "127.0.0.1:1", Margin: -time.Millisecond},
		{Addr: "127.0.0.1:1", TTL: 2 * time.Second, Margin: time.Second},
		{Addr: "127.0.0.1:1", Window: 1},
	} {
		o.Store = memory.New() // what is wrong is something else
		if _, err := etcd.StartCandidate(nil, o); !errors.Is(err, oracle.ErrInvalidArgument) {
			t.Errorf("%+v: %v; want ErrInvalidArgument", o, err)
		}
	}
	if _, err := etcd.StartCandidate(nil, etcd.CandidateOptions{Addr: "127.0.0.1:1"}); !errors.Is(err, oracle.ErrInvalidArgument) {
		t.Errorf("no Store: %v; want ErrInvalidArgument", err)
	}
	if _, err := etcd.NewOracleBackend(nil, etcd.OracleBackendOptions{Budget: -1}); !errors.Is(err, oracle.ErrInvalidArgument) {
		t.Errorf("negative budget: %v", err)
	}
}

// TestOracleBackendToken: the discovery backend sends the token; a wrong
// one fails on its first call (no retrying for the budget: each retry is
// a call), the right one gets timestamps.
func TestOracleBackendToken(t *testing.T) {
	m := etcdtest.Start(t)
	a := startNodeToken(t, m, etcd.CandidateOptions{}, "s3cret")
	waitLeading(t, 10*time.Second, a)
	for _, c := range []struct {
		token string
		ok    bool
	}{{"wrong", false}, {"s3cret", true}} {
		var calls atomic.Int64
		unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			calls.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			calls.Add(1)
			return streamer(ctx, desc, cc, method, opts...)
		}
		dial := rpc.DialOptions{Token: c.token, GRPC: []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}}
		b, err := etcd.NewOracleBackend(etcdtest.Client(t, m), etcd.OracleBackendOptions{Dial: dial, Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Allocate(bg, 1)
		_ = b.Close()
		if c.ok != (err == nil) || (!c.ok && (!errors.Is(err, rpc.ErrUnauthenticated) || calls.Load() != 1)) {
			t.Errorf("token %q: %v after %d calls", c.token, err, calls.Load())
		}
	}
}

// TestOracleBackendVersion: the discovery backend is versioned reply by
// reply. While the leader was given the store, each timestamp carries the
// observer registry version read from it (0, then raised by a
// registration); once a candidate without a store leads (a rolling
// restart), timestamps carry no version, so the committer reads the
// registry itself.
func TestOracleBackendVersion(t *testing.T) {
	m := etcdtest.Start(t)
	st := memory.New()
	db, err := percolator.Open(bg, percolator.Options{Store: st, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := startNodeServer(t, m, etcd.CandidateOptions{}, server.OracleOptions{Store: st, RegistryVersion: observer.StoredVersion})
	waitLeading(t, 10*time.Second, a)
	bare := startNode(t, m, etcd.CandidateOptions{})
	be, err := etcd.NewOracleBackend(etcdtest.Client(t, m), etcd.OracleBackendOptions{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var _ oracle.VersionedBackend = be
	c := oracle.NewClient(be)
	var last uint64
	stamp := func(wantOK bool) uint64 {
		t.Helper()
		ts, v, ok, err := c.TimestampVersion(bg)
		if err != nil || ok != wantOK || ts <= last {
			t.Fatalf("TimestampVersion: %d (version %d, ok %v), %v; want above %d, ok %v", ts, v, ok, err, last, wantOK)
		}
		last = ts
		return v
	}
	if v := stamp(true); v != 0 {
		t.Fatalf("nothing registered: version %d", v)
	}
	noop := func(context.Context, *percolator.Txn, string, string) error { return nil }
	if err := db.Observe(bg, percolator.Observer{Name: "o", Column: "c", Fn: noop}); err != nil {
		t.Fatal(err)
	}
	want, err := observer.StoredVersion(bg, st)
	if err != nil || want == 0 {
		t.Fatalf("stored version after a registration: %d, %v", want, err)
	}
	if v := stamp(true); v != want {
		t.Fatalf("after a registration: version %d; want %d", v, want)
	}
	_ = a.cand.Close()
	waitLeading(t, 5*time.Second, bare)
	stamp(false)
}
