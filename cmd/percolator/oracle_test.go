package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	coordetcd "github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/observer"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/oracle/etcd"
	"github.com/seed-992972ee/percolator/rpc/rpcpb"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/storage/bigtable/bttesting"
)

// oracleLease is the lease of the oracle processes under test: etcd's
// practical minimum.
const oracleLease = 2 * time.Second

// lockedBuffer is a process's stderr, read by the test on failure.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// oracleProc is a `percolator oracle` process.
type oracleProc struct {
	addr   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
}

// oracleEmulators holds the emulator each test's oracles share when the
// test names no table.
var oracleEmulators sync.Map // *testing.T → emulator address

// oracleTable is the table ("test/test/oracles") of a Bigtable emulator
// started for t's oracles when the test names none, and the emulator's
// address, which only the oracle processes are given: the test's own
// BIGTABLE_EMULATOR_HOST, if it runs an emulator too, stays as it is.
func oracleTable(t *testing.T) (table, emulator string) {
	const name = "test/test/oracles"
	if addr, ok := oracleEmulators.Load(t); ok {
		return name, addr.(string)
	}
	emu := bttesting.Start(t)
	if err := bigtable.Init(context.Background(), bttesting.Options(t, emu, "oracles")); err != nil {
		t.Fatal(err)
	}
	oracleEmulators.Store(t, emu.Addr())
	t.Cleanup(func() { oracleEmulators.Delete(t) })
	return name, emu.Addr()
}

// startOracleProc starts `percolator oracle` on etcd member m, listening
// on a free loopback port, and waits until the port accepts. Without
// --bigtable among extra, it uses the test's table (oracleTable).
func startOracleProc(t *testing.T, m *coordetcd.Embedded, lease time.Duration, extra ...string) *oracleProc {
	t.Helper()
	return startOracleProcOn(t, strings.Join(m.Endpoints(), ","), lease, extra...)
}

// startOracleProcOn is startOracleProc on the etcd endpoints given.
func startOracleProcOn(t *testing.T, endpoints string, lease time.Duration, extra ...string) *oracleProc {
	t.Helper()
	return startOracleProcEnv(t, endpoints, lease, nil, extra...)
}

// startOracleProcEnv is startOracleProcOn with env added to the process's
// environment: emulatorEnv, for a table --bigtable names in an emulator
// of the test's.
func startOracleProcEnv(t *testing.T, endpoints string, lease time.Duration, env []string, extra ...string) *oracleProc {
	t.Helper()
	if !slices.Contains(extra, "--bigtable") {
		table, emulator := oracleTable(t)
		extra = append(extra, "--bigtable", table)
		env = append(slices.Clip(env), emulatorEnv(emulator)...) // the last of duplicate keys counts
	}
	p := &oracleProc{addr: freeAddr(t), stderr: &lockedBuffer{}}
	args := append([]string{"oracle", "--etcd", endpoints, "--listen", p.addr, "--lease", lease.String()}, extra...)
	p.cmd = commandEnv(env, args...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		killProc(p.cmd)
		if t.Failed() || testing.Verbose() {
			t.Logf("oracle %s stderr:\n%s", p.addr, p.stderr)
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			_ = c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("oracle on %s did not start: %v\n%s", p.addr, err, p.stderr)
		}
	}
}

// electedKey is the election's first-created key (the leader's) and its
// value, or "" if none.
func electedKey(ctx context.Context, cli *clientv3.Client) (key, addr string, err error) {
	resp, err := cli.Get(ctx, etcd.DefaultOraclePrefix+"oracle/leader/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return "", "", err
	}
	return string(resp.Kvs[0].Key), string(resp.Kvs[0].Value), nil
}

// waitLeader waits until the elected oracle is one of procs and answers,
// and returns it.
func waitLeader(t *testing.T, cli *clientv3.Client, within time.Duration, procs ...*oracleProc) *oracleProc {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, addr, err := electedKey(context.Background(), cli)
		if err != nil || addr == "" {
			continue
		}
		for _, p := range procs {
			if p.addr == addr && allocateAt(addr) == nil {
				return p
			}
		}
	}
	t.Fatalf("none of the oracles leads after %v", within)
	return nil
}

// allocateAt asks the oracle at addr for one timestamp directly (no
// discovery, no retry).
func allocateAt(addr string) error {
	_, err := allocateReply(addr)
	return err
}

// allocateReply is allocateAt, returning the reply.
func allocateReply(addr string) (*rpcpb.AllocateResponse, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return rpcpb.NewOracleClient(cc).Allocate(ctx, &rpcpb.AllocateRequest{Count: 1})
}

// stampCall is one timestamp a client got, and when it asked and got it.
type stampCall struct {
	start, end time.Time
	ts         uint64
}

// checkStampHistory is DESIGN invariant 1 as the clients see it: no
// timestamp handed out twice, and a call that began after another one
// returned got a greater timestamp, whichever clients made them.
func checkStampHistory(t *testing.T, calls []stampCall) {
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
	high := make([]uint64, len(byEnd)) // high[i]: the largest of byEnd[:i+1]
	for i, c := range byEnd {
		high[i] = c.ts
		if i > 0 {
			high[i] = max(high[i], high[i-1])
		}
	}
	for _, c := range calls {
		k := sort.Search(len(byEnd), func(i int) bool { return !byEnd[i].end.Before(c.start) })
		if k > 0 && high[k-1] >= c.ts {
			t.Fatalf("a call begun at %s got %d, not above %d returned before it began", c.start.Format(time.StampMicro), c.ts, high[k-1])
		}
	}
}

// stampLoad is clients oracle clients in this process, each with its own
// discovery backend (as separate client processes would have), asking
// for timestamps in 4 goroutines each until stop.
type stampLoad struct {
	mu     sync.Mutex
	calls  []stampCall
	errors []error
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startStampLoad(t *testing.T, m *coordetcd.Embedded, clients int) *stampLoad {
	l := &stampLoad{stop: make(chan struct{})}
	for range clients {
		b, err := etcd.NewOracleBackend(etcdtest.Client(t, m), etcd.OracleBackendOptions{Logger: discardLog()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		oc := oracle.NewClient(b)
		for range 4 {
			l.wg.Add(1)
			go l.run(oc)
		}
	}
	return l
}

func (l *stampLoad) run(oc *oracle.Client) {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		start := time.Now()
		ts, err := oc.Timestamp(context.Background())
		l.mu.Lock()
		if err != nil {
			l.errors = append(l.errors, err)
		} else {
			l.calls = append(l.calls, stampCall{start, time.Now(), ts})
		}
		l.mu.Unlock()
		if err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// finish stops the load and returns the calls that succeeded, failing the
// test on any error.
func (l *stampLoad) finish(t *testing.T) []stampCall {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if len(l.errors) > 0 {
		t.Fatalf("%d Timestamp calls failed, the first: %v", len(l.errors), l.errors[0])
	}
	return l.calls
}

// firstAfter is how long after at the first call begun after at returned
// (-1: none did).
func firstAfter(calls []stampCall, at time.Time) time.Duration {
	first := time.Duration(-1)
	for _, c := range calls {
		if c.start.After(at) {
			if d := c.end.Sub(at); first < 0 || d < first {
				first = d
			}
		}
	}
	return first
}

// TestOracleCmdFailover: two `percolator oracle` processes; clients load
// the leader; it is killed with SIGKILL; the other takes over within
// about the lease, and the clients' timestamps stay strictly increasing.
func TestOracleCmdFailover(t *testing.T) {
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	a := startOracleProc(t, m, oracleLease)
	waitLeader(t, cli, 10*time.Second, a)
	b := startOracleProc(t, m, oracleLease)
	load := startStampLoad(t, m, 3)
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	killProc(a.cmd)
	waitLeader(t, cli, 3*oracleLease, b)
	time.Sleep(500 * time.Millisecond)
	calls := load.finish(t)
	failover := firstAfter(calls, killed)
	t.Logf("failover from SIGKILL to the first timestamp asked after it: %v (lease %v); %d timestamps", failover, oracleLease, len(calls))
	if failover < 0 {
		t.Fatal("no timestamp after the kill")
	}
	checkStampHistory(t, calls)
}

// TestOracleCmdPaused: the leading oracle is stopped with SIGSTOP past its
// lease while clients keep asking, and a request waits in its socket;
// the other takes over; resumed with SIGCONT, the paused one answers that
// request, and every other, Unavailable (not the leader) until it wins an
// election again (its rival is killed), and the clients' timestamps stay
// strictly increasing throughout.
func TestOracleCmdPaused(t *testing.T) {
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	a := startOracleProc(t, m, oracleLease)
	waitLeader(t, cli, 10*time.Second, a)
	b := startOracleProc(t, m, oracleLease)
	load := startStampLoad(t, m, 2)

	// A stream to a, with a request sent while it is stopped.
	cc, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := rpcpb.NewOracleClient(cc).AllocateStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpcpb.AllocateRequest{Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, a.cmd.Process.Pid)
	stopped := time.Now()
	if err := stream.Send(&rpcpb.AllocateRequest{Count: 1}); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, cli, 4*oracleLease, b)
	time.Sleep(oracleLease)
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped for %v; clients' first timestamp asked after the stop came %v after it", time.Since(stopped), firstAfter(load.snapshot(), stopped))
	if resp, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the request sent to the stopped leader got %v, %v after SIGCONT; want Unavailable", resp, err)
	}
	for end := time.Now().Add(oracleLease); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := allocateAt(a.addr); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not the leader") {
			t.Fatalf("the resumed oracle answered %v; want Unavailable, not the leader", err)
		}
	}
	killProc(b.cmd)
	waitLeader(t, cli, 3*oracleLease, a)
	time.Sleep(300 * time.Millisecond)
	calls := load.finish(t)
	checkStampHistory(t, calls)
	t.Logf("%d timestamps", len(calls))
}

// waitStopped waits until every thread of process pid is stopped
// (SIGSTOP is delivered asynchronously): on Linux by /proc, elsewhere by
// waiting a while.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	if _, err := os.Stat(dir); err != nil {
		time.Sleep(500 * time.Millisecond)
		return
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if allStopped(dir) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop", pid)
		}
	}
}

func allStopped(taskDir string) bool {
	tasks, err := os.ReadDir(taskDir)
	if err != nil {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(taskDir + "/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold anything but ends at the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}

func (l *stampLoad) snapshot() []stampCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// TestOracleCmdSIGTERM: SIGTERM makes the leader resign and exit 0; the
// standby leads well within the lease (3s), not after it. Each
// candidate's status page (--http) says whether it leads.
func TestOracleCmdSIGTERM(t *testing.T) {
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	httpA, httpB := freeAddr(t), freeAddr(t)
	a := startOracleProc(t, m, 3*time.Second, "--http", httpA)
	waitLeader(t, cli, 10*time.Second, a)
	b := startOracleProc(t, m, 3*time.Second, "--http", httpB)
	// Their status pages say which leads.
	waitPage(t, "http://"+httpA+"/", "This candidate ("+a.addr+") leads")
	waitPage(t, "http://"+httpB+"/", "This candidate ("+b.addr+") does not lead", "(standing by)")
	start := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	waitLeader(t, cli, 2*time.Second, b)
	t.Logf("the standby leads %v after SIGTERM", time.Since(start))
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("oracle after SIGTERM: %v (want exit 0)", err)
	}
	if !strings.Contains(a.stderr.String(), "resigning") {
		t.Errorf("no resignation logged:\n%s", a.stderr)
	}
}

// TestOracleCmdBadInput: oracle's refusals are usage errors (exit 2 and a
// message); an etcd that does not answer is a run-time error naming it.
func TestOracleCmdBadInput(t *testing.T) {
	t.Parallel() // it waits out an unreachable etcd most of the time: another test may run meanwhile
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"oracle"},
		{"oracle", "--etcd", ""},
		{"oracle", "--etcd", " , "},
		{"oracle", "--etcd", "127.0.0.1:1,", "--listen", "127.0.0.1:0"},
		{"oracle", "--etcd", "127.0.0.1:1", "--lease", "1500ms"},
		{"oracle", "--etcd", "127.0.0.1:1", "--lease", "0s"},
		{"oracle", "--etcd", "127.0.0.1:1", "--lease", "-3s"},
		{"oracle", "--etcd", "127.0.0.1:1", "--lease", "2h"},
		{"oracle", "--etcd", "127.0.0.1:1", "--lease", "soon"},
		{"oracle", "--etcd", "127.0.0.1:1", "--etcd-prefix", ""},
		{"oracle", "--etcd", "127.0.0.1:1", "--listen", "0.0.0.0:0", "--bigtable", "p/i/t"},
		{"oracle", "--etcd", "127.0.0.1:1", "--listen", "0.0.0.0:0", "--bigtable", "p/i/t", "--token-file", tokenFile},
		{"oracle", "--etcd", "127.0.0.1:1", "--bigtable", "p/i/t", "--insecure", "--tls-cert", "c", "--tls-key", "k"},
		{"oracle", "--etcd", "127.0.0.1:1", "--listen", "127.0.0.1:0"}, // no --bigtable
		{"oracle", "--etcd", "127.0.0.1:1", "--tls-cert", "x"},
		{"oracle", "--etcd", "127.0.0.1:1", "--log-format", "xml"},
		{"oracle", "--etcd", "127.0.0.1:1", "extra"},
		{"oracle", "--etcd", "127.0.0.1:1", "--bigtable", "p/i"},
		{"oracle", "--etcd", "127.0.0.1:1", "--bigtable", "p//t"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	dead := freeAddr(t)
	// It gives up after its check's timeout (which the message names),
	// not after some longer retrying.
	_, errOut, code := runCLI(t, "oracle", "--etcd", dead, "--listen", freeAddr(t), "--bigtable", "p/i/t")
	if code != 1 || !strings.Contains(errOut, dead) || !strings.Contains(errOut, "unreachable (no answer within 5s)") {
		t.Fatalf("oracle on an etcd that is down: exit %d: %s", code, errOut)
	}
}

// TestOracleCmdFailoverFigure is the failover figure: two oracle processes
// under load from 3 clients for PERCOLATOR_ORACLE_FIGURE's duration (e.g.
// 20s) with no kill, counting leader changes (false failovers), then the
// leader killed with SIGKILL 3 times (restarted each time), timing each
// failover to the first timestamp asked after the kill.
// PERCOLATOR_ORACLE_LEASE sets the lease (default 2s).
func TestOracleCmdFailoverFigure(t *testing.T) {
	run, err := time.ParseDuration(os.Getenv("PERCOLATOR_ORACLE_FIGURE"))
	if err != nil {
		t.Skip("the failover figure: set PERCOLATOR_ORACLE_FIGURE to the loaded run's duration, e.g. 20s")
	}
	lease := oracleLease
	if l, err := time.ParseDuration(os.Getenv("PERCOLATOR_ORACLE_LEASE")); err == nil {
		lease = l
	}
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	procs := []*oracleProc{startOracleProc(t, m, lease)}
	waitLeader(t, cli, 10*time.Second, procs[0])
	procs = append(procs, startOracleProc(t, m, lease))
	load := startStampLoad(t, m, 3)

	changes := watchLeaderKey(t, cli, run)
	t.Logf("loaded run of %v, lease %v: %d timestamps, %d false failovers (leader changes without a kill)", run, lease, len(load.snapshot()), changes)

	var times []time.Duration
	for i := range 3 {
		leader := waitLeader(t, cli, 3*lease, procs...)
		killed := time.Now()
		killProc(leader.cmd)
		other := procs[0]
		if other == leader {
			other = procs[1]
		}
		waitLeader(t, cli, 3*lease, other)
		time.Sleep(300 * time.Millisecond)
		d := firstAfter(load.snapshot(), killed)
		times = append(times, d)
		t.Logf("kill %d: failover %v", i+1, d)
		procs = []*oracleProc{other, startOracleProc(t, m, lease)}
	}
	calls := load.finish(t)
	checkStampHistory(t, calls)
	slices.Sort(times)
	t.Logf("FIGURE oracle failover, lease %v: min %v, median %v, max %v over %d kills; %d false failovers in %v of load (%d timestamps, strictly increasing)",
		lease, times[0], times[len(times)/2], times[len(times)-1], len(times), changes, run, len(calls))
	if changes > 0 {
		t.Errorf("%d false failovers", changes)
	}
}

// watchLeaderKey polls the election for d and counts the changes of the
// leader's key (a new key is a new election, even of the same process).
func watchLeaderKey(t *testing.T, cli *clientv3.Client, d time.Duration) int {
	t.Helper()
	key, _, err := electedKey(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	changes := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		k, addr, err := electedKey(context.Background(), cli)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return changes
			}
			continue
		}
		if k != key {
			changes++
			t.Logf("leader changed to %s (%s)", addr, k)
			key = k
		}
	}
	return changes
}

// TestOracleCmdBigtable: `oracle --bigtable` answers each allocation with
// the table's observer registry version (0 before any registration, then
// the version a registration raised it to) and keeps the mark's copy
// there; without --bigtable it does not start (exit 2); a table that does
// not exist fails at start, exit 1, naming it.
func TestOracleCmdBigtable(t *testing.T) {
	ctx := context.Background()
	emu := bttesting.Start(t)
	t.Setenv("BIGTABLE_EMULATOR_HOST", emu.Addr()) // the children's and runCLI's
	const table = "test/test/oracle"
	var bopts bigtable.Options
	_ = bopts.ParseTable(table)
	if err := bigtable.Init(ctx, bopts); err != nil {
		t.Fatal(err)
	}
	st, err := bigtable.Open(ctx, bopts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	with := startOracleProc(t, m, oracleLease, "--bigtable", table)
	waitLeader(t, cli, 20*time.Second, with)
	version := func(addr string) *uint64 {
		t.Helper()
		resp, err := allocateReply(addr)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ObserversVersion
	}
	if v := version(with.addr); v == nil || *v != 0 {
		t.Fatalf("nothing registered: version %v; want 0", v)
	}
	db, err := cluster.Open(ctx, cluster.Options{Bigtable: bopts, Etcd: m.Endpoints(), DB: percolator.Options{Logger: discardLog()}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	noop := func(context.Context, *percolator.Txn, string, string) error { return nil }
	if err := db.Observe(ctx, percolator.Observer{Name: "o", Column: "c", Fn: noop}); err != nil {
		t.Fatal(err)
	}
	want, err := observer.StoredVersion(ctx, st)
	if err != nil || want == 0 {
		t.Fatalf("stored version after a registration: %d, %v", want, err)
	}
	if v := version(with.addr); v == nil || *v != want {
		t.Fatalf("after a registration: version %v; want %d", v, want)
	}

	if mark, err := oracle.ReadMirror(ctx, st); err != nil || mark == 0 {
		t.Fatalf("the mark's copy in the table: %d %v", mark, err)
	}
	_, errOut, code := runCLI(t, "oracle", "--etcd", strings.Join(m.Endpoints(), ","), "--listen", freeAddr(t))
	if code != 2 || !strings.Contains(errOut, "--bigtable is required") {
		t.Fatalf("oracle without --bigtable: exit %d: %s", code, errOut)
	}

	_, errOut, code = runCLI(t, "oracle", "--etcd", strings.Join(m.Endpoints(), ","), "--listen", freeAddr(t), "--bigtable", "test/test/absent")
	if code != 1 || !strings.Contains(errOut, "absent") || !strings.Contains(errOut, "no such table") {
		t.Fatalf("oracle on a table that does not exist: exit %d: %s", code, errOut)
	}
}
