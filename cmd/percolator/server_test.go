package main

import (
	"bufio"
	"context"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/internal/loopback"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// serveProc starts `percolator serve` on dir and addr and waits until it
// answers.
func serveProc(t *testing.T, dir, addr string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := command(append([]string{"serve", "--dir", dir, "--listen", addr}, extra...)...)
	cmd.Stderr = os.Stderr
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	} else {
		cmd.Stderr = nil
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve on %s did not start: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func killProc(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// TestServeSIGTERM: serve drains and exits 0 on SIGTERM; a second serve
// on the same directory finds what the first acknowledged.
func TestServeSIGTERM(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	dir, addr := t.TempDir(), freeAddr(t)
	srv := serveProc(t, dir, addr)
	if out, errOut, code := runCLI(t, "bank", "--server", addr, "--accounts", "10", "--workers", "2", "--duration", "300ms", "--quiet"); code != 0 {
		t.Fatalf("bank: exit %d\n%s%s", code, out, errOut)
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v (want exit 0)", err)
	}
	serveProc(t, dir, addr)
	out, errOut, code := runCLI(t, "bank", "--server", addr, "--accounts", "10", "--workers", "2", "--duration", "200ms", "--quiet")
	if code != 0 || !strings.Contains(out, "wrong totals: 0") {
		t.Fatalf("bank after restart: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "bank", "--server", addr, "--accounts", "11", "--duration", "100ms"); code != 1 || !strings.Contains(errOut, "has 10 accounts") {
		t.Fatalf("the server lost the bank: exit %d %s", code, errOut)
	}
}

// TestServeBadInput: serve's refusals are usage errors; a client of a
// server that is down names the address.
func TestServeBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"serve"},
		{"serve", "--dir", t.TempDir(), "--listen", "0.0.0.0:0"},
		{"serve", "--dir", t.TempDir(), "--tls-cert", "x"},
		{"serve", "--dir", t.TempDir(), "--sync-delay", "1s"},
		{"worker"},
		{"worker", "--dir", t.TempDir()},
		{"bank", "--dir", t.TempDir(), "--server", "127.0.0.1:1"},
		{"locks", "--dir", t.TempDir(), "--token-file", "x"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	addr := freeAddr(t)
	// It gives up when its retry budget is spent (which the message
	// names), not after the default's.
	_, errOut, code := runCLI(t, "locks", "--server", addr, "--retry-budget", "1s")
	if code != 1 || !strings.Contains(errOut, addr) || !strings.Contains(errOut, "unavailable") || !strings.Contains(errOut, "--retry-budget (1s) is spent") {
		t.Fatalf("locks on a server that is down: exit %d: %s", code, errOut)
	}
}

// TestBankOverServerKills: four bank processes on one server are killed
// with SIGKILL at random and restarted; the server is killed with SIGKILL
// and restarted twice. Totals are conserved, every acknowledged transfer
// is there, and every lock is resolved at the end.
func TestBankOverServerKills(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess soak")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	const accounts = 30
	var srvMu sync.Mutex
	srv := serveProc(t, dir, addr)
	stop := make(chan struct{})
	var (
		mu    sync.Mutex
		acked []string
		kills int
		wg    sync.WaitGroup
	)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(c)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmd := command("bank", "--server", addr, "--accounts", strconv.Itoa(accounts), "--workers", "4", "--readers", "1",
					"--duration", "60s", "--ack", "--quiet")
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Error(err)
					return
				}
				if err := cmd.Start(); err != nil {
					t.Error(err)
					return
				}
				done, first := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					sc := bufio.NewScanner(out)
					for n := 0; sc.Scan(); {
						if row, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
							mu.Lock()
							acked = append(acked, row)
							mu.Unlock()
							if n++; n == 1 {
								close(first)
							}
						}
					}
				}()
				// Killed a while after its first acknowledged transfer, not
				// after a while: a race build's process on a busy machine
				// took longer than the whole while to start.
				select {
				case <-first:
					select {
					case <-time.After(time.Duration(500+rng.IntN(2500)) * time.Millisecond):
					case <-stop:
					}
				case <-stop:
				}
				killProc(cmd)
				<-done
				mu.Lock()
				kills++
				mu.Unlock()
			}
		}()
	}
	for range 2 {
		time.Sleep(4 * time.Second)
		srvMu.Lock()
		killProc(srv)
		time.Sleep(200 * time.Millisecond)
		srv = serveProc(t, dir, addr)
		srvMu.Unlock()
	}
	time.Sleep(4 * time.Second)
	// Some transfer acknowledged before the clients stop, however slow
	// the machine (a minute at most).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("%d client processes killed, %d transfers acknowledged", kills, len(acked))
	if len(acked) == 0 {
		t.Fatal("no transfer was acknowledged: the test checked nothing")
	}
	mu.Unlock()
	checkServerBank(t, addr, accounts, acked)
}

// checkServerBank checks the bank on the server at addr: the total, the
// acknowledged transfers, and (once the dead clients' sessions expired)
// no lock left.
func checkServerBank(t *testing.T, addr string, accounts int, acked []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db, err := percolator.Open(ctx, percolator.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkBankTotals(ctx, t, db, accounts, acked)
	// The killed clients' sessions expire within their lease (10s) and
	// the server's restart grace (10s): then their locks resolve.
	for {
		if _, err := db.ResolveLocks(ctx); err != nil {
			t.Fatal(err)
		}
		locks, err := db.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(locks) == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d locks left unresolved, e.g. %s/%s of %s", len(locks), locks[0].Row, locks[0].Column, locks[0].Lock.Owner)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestIndexOverServerWithWorkers: `index --server` and two `worker`
// processes keep one index at once; one worker is killed with SIGKILL
// mid-run; the index equals a batch build (--verify).
func TestIndexOverServerWithWorkers(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess soak")
	}
	src := bigCorpus(t, 150)
	dir, addr := t.TempDir(), freeAddr(t)
	serveProc(t, dir, addr)
	workers := make([]*exec.Cmd, 2)
	var workerErr [2]lockedBuffer
	for i := range workers {
		workers[i] = command("worker", "--server", addr, "--scanners", "2")
		workers[i].Stderr = &workerErr[i]
		if err := workers[i].Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killProc(workers[i]) })
	}
	idx := command("index", "--server", addr, "--quiet", "--scanners", "2", "--verify", src)
	var out strings.Builder
	idx.Stdout, idx.Stderr = &out, &out
	if err := idx.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(1000+rand.IntN(1500)) * time.Millisecond)
	killProc(workers[0])
	if err := idx.Wait(); err != nil {
		t.Fatalf("index with a worker killed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "equals a from-scratch batch build") {
		t.Fatalf("index did not verify:\n%s", out.String())
	}
	// The surviving worker ran observers too.
	_ = workers[1].Process.Signal(syscall.SIGTERM)
	if err := workers[1].Wait(); err != nil {
		t.Fatalf("worker after SIGTERM: %v (want exit 0)\n%s", err, workerErr[1].String())
	}
	sout, errOut, code := runCLI(t, "status", "--server", addr)
	if code != 0 || !strings.Contains(sout, "document") {
		t.Fatalf("status --server: exit %d\n%s%s", code, sout, errOut)
	}
	t.Logf("index:\n%s\nstatus:\n%s", out.String(), sout)
}

// TestOracleMonotonicAcrossServerKills: timestamps only go forward across
// 24 restarts of `serve`, three in four of them SIGKILL, the others
// SIGTERM. A soak sets more with PERCOLATOR_ORACLE_RESTARTS (each costs a
// process start, about 0.8 s under the race detector: 100 made this the
// package's longest test); the server package's test restarts 200 times
// in process, with power cuts.
func TestOracleMonotonicAcrossServerKills(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess soak")
	}
	restarts := 24
	if n, err := strconv.Atoi(os.Getenv("PERCOLATOR_ORACLE_RESTARTS")); err == nil {
		restarts = n
	}
	dir, addr := t.TempDir(), freeAddr(t)
	ctx := context.Background()
	var last uint64
	for i := range restarts {
		srv := serveProc(t, dir, addr)
		db, err := percolator.Open(ctx, percolator.Options{Server: addr})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			tx, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ts := tx.StartTS(); ts <= last {
				t.Fatalf("restart %d: timestamp %d after %d", i, ts, last)
			} else {
				last = ts
			}
			_ = tx.Rollback(ctx)
		}
		if i%4 == 3 {
			_ = srv.Process.Signal(syscall.SIGTERM)
			_ = srv.Wait()
			_ = db.Close()
			continue
		}
		killProc(srv) // with the DB's calls possibly in flight
		_ = db.Close()
	}
	t.Logf("%d restarts, last timestamp %d", restarts, last)
}

// TestNonceSurvivesServerKill (HBASE-3787 with a process kill): the
// server applies an Increment and a CheckAndMutate, their replies are
// lost (a proxy drops them), the server is killed with SIGKILL and
// restarted; the client's retries get the original results from the
// restored nonce table and nothing is applied twice.
func TestNonceSurvivesServerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	srv := serveProc(t, dir, addr)
	proxy, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	ctx := context.Background()
	conn, err := rpc.Dial(ctx, proxy.Addr(), rpc.DialOptions{CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := remote.New(ctx, conn, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	row := []byte("counter")
	if _, err := st.Increment(ctx, row, "n", "c", 5); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() (string, error)
		want string
	}{
		{"Increment", func() (string, error) {
			v, err := st.Increment(ctx, row, "n", "c", 10)
			return strconv.FormatInt(v, 10), err
		}, "15"},
		{"CheckAndMutate", func() (string, error) {
			// Writes the cell if absent: the first run finds it absent.
			m, err := st.CheckAndMutate(ctx, row, storage.Filter{{Family: "n", Qualifier: "once"}}, nil,
				[]storage.Mutation{storage.SetCell("n", "once", 1, []byte("x"))})
			return strconv.FormatBool(m), err
		}, "false"},
	}
	for i, c := range calls {
		proxy.DropNextResponse()
		res := make(chan string, 1)
		go func() {
			v, err := c.call()
			if err != nil {
				v = "error: " + err.Error()
			}
			res <- v
		}()
		for proxy.Dropped() < i+1 {
			time.Sleep(time.Millisecond)
		}
		killProc(srv) // applied, reply lost: now the process dies
		srv = serveProc(t, dir, addr)
		if got := <-res; got != c.want {
			t.Fatalf("%s after the kill: %s, want the original result %s", c.name, got, c.want)
		}
	}
	v, err := st.Increment(ctx, row, "n", "c", 0)
	if err != nil || v != 15 {
		t.Fatalf("counter %d (%v): the retried Increment was applied %d times", v, err, (v-5)/10)
	}
}

// TestReadCommandsOverServer: dump, locks, status, notifications and
// index queries take --server as they take --dir.
func TestReadCommandsOverServer(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	serveProc(t, dir, addr)
	if out, errOut, code := runCLI(t, "index", "--server", addr, "--quiet", corpus); code != 0 {
		t.Fatalf("index: exit %d\n%s%s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"index", "--server", addr, "query", "Closure"}, "The-Closure-API.html\tThe Closure API"},
		{[]string{"index", "--server", addr, "--dups"}, "Simple-Example.html (canonical)"},
		{[]string{"dump", "--server", addr, "--prefix", "doc", "--limit", "2"}, "COLUMN"},
		{[]string{"locks", "--server", addr, "--resolve"}, "0 locks"},
		{[]string{"status", "--server", addr}, "documents"},
		{[]string{"notifications", "--server", addr}, "0 pending"},
	} {
		out, errOut, code := runCLI(t, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %q in\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
	tok := t.TempDir() + "/token"
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "locks", "--server", addr, "--token-file", tok+".missing")
	if code != 1 || !strings.Contains(errOut, "--token-file "+tok+".missing: no such file") {
		t.Errorf("missing token file: exit %d %s", code, errOut)
	}
	// A server with a token: refused without it, served with it.
	taddr := freeAddr(t)
	serveProc(t, t.TempDir(), taddr, "--token-file", tok)
	if _, errOut, code := runCLI(t, "locks", "--server", taddr); code != 1 || !strings.Contains(errOut, "wants a token, and none was given") {
		t.Errorf("no token: exit %d %s", code, errOut)
	}
	if out, errOut, code := runCLI(t, "locks", "--server", taddr, "--token-file", tok); code != 0 || !strings.Contains(out, "0 locks") {
		t.Errorf("with the token: exit %d %s%s", code, out, errOut)
	}
}

// TestBenchServer runs the server figures at a small scale: each completes
// and prints its ratio.
func TestBenchServer(t *testing.T) {
	t.Parallel() // it checks what the figures print, not how fast they are: another test may run meanwhile
	if testing.Short() {
		t.Skip("benchmark smoke test")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	serveProc(t, dir, addr)
	out, errOut, code := runCLI(t, "bench", "--server", addr, "--duration", "400ms", "--keys", "200", "--writers", "8", "--gc-duration", "2s", "--gc-versions", "2")
	checkBenchExit(t, out, errOut, code)
	for _, re := range []string{
		`oracle: +[0-9]+ timestamps/s from 4 processes x 64 goroutines .* mean batch [0-9.]+, [0-9]+ requests/s;\n +empty unary calls: [0-9]+/s one in flight per process .*: [0-9.]+x of calls x batch \(target >= 0.8x: (met|MISSED)\); [0-9]+/s from all 4 x 64 goroutines: [0-9.]+x`,
		`reads: +[0-9]+ reads/s in read-only txns .* vs [0-9]+ raw ReadRow RPCs/s at 8 readers: ratio [0-9.]+x`,
		`writes: +[0-9]+ txn/s one-phase, [0-9]+ two-phase vs [0-9]+ raw durable Mutate RPCs/s at 8 writers, 100-byte values: ratio [0-9.]+x one-phase \(target >= 0.6x: [a-zA-Z]+\), [0-9.]+x two-phase`,
		`nonces: +[0-9]+ Increments/s with nonces vs [0-9]+ without at 8 callers: ratio [0-9.]+x`,
		`targets: [0-9] met, [0-9] missed`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("bench --server output lacks %s:\n%s", re, out)
		}
	}
	if _, _, code := runCLI(t, "bench", "--server", addr, "--only", "bank"); code != 2 {
		t.Errorf("--only bank with --server: exit %d, want 2", code)
	}
}
