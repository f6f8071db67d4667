//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
)

// TestDeadClientLocksResolvedAtSessionExpiry: a `bank --server
// --session-ttl 3s` process is stopped while it holds locks and killed
// with SIGKILL; a reader of one of its locked cells must find it dead by
// its session (expired 3s after its last renewal) and resolve the lock,
// not wait for the lock's own TTL (10s).
func TestDeadClientLocksResolvedAtSessionExpiry(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, addr := t.TempDir(), freeAddr(t)
	serveProc(t, dir, addr)
	const accounts = 10
	a := startBankProc(t, "A", nil, []string{"--server", addr, "--session-ttl", "3s"}, accounts)
	a.waitAcks(t, 1, 30*time.Second)
	db, err := percolator.Open(ctx, percolator.Options{Server: addr, Logger: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pid := a.cmd.Process.Pid
	held := a.stopHoldingPid(ctx, t, db, pid)
	a.signal(t, syscall.SIGKILL)
	killed := time.Now()
	<-a.done
	_ = a.cmd.Wait()
	l := held[0]
	err = db.View(ctx, func(tx *percolator.Txn) error {
		_, err := tx.Get(ctx, string(l.Row), l.Column)
		return err
	})
	waited := time.Since(killed)
	// Not found is a resolution too: a transfer's record row is new, and
	// the killed transaction, rolled back, leaves it empty.
	if err != nil && !errors.Is(err, percolator.ErrNotFound) {
		t.Fatalf("reading %s/%s of the killed process: %v", l.Row, l.Column, err)
	}
	t.Logf("the read of %s/%s, locked by the killed process, returned %v after the kill (lock TTL %v)",
		l.Row, l.Column, waited.Round(time.Millisecond), time.Duration(l.Lock.TTLMS)*time.Millisecond)
	// The dead process's session expires at most 3s after the kill (its
	// last renewal was before it), and the server sweeps it within 100ms;
	// its lock, written just before the stop, expires about 10s after it.
	// 8s leaves 5s to a loaded machine past the session's expiry, while a
	// read that waited for the lock's TTL could not return before 9.9s or
	// so: the bound separates the two mechanisms, it does not time the
	// machine.
	if waited >= 8*time.Second {
		t.Fatalf("the read waited %v after the kill: the lock was resolved by its TTL, not by the owner's expired 3s session", waited.Round(time.Millisecond))
	}
}

// stopHoldingPid is stopHolding for a process whose owner ID names its
// pid (coord.NewOwnerID: host/pid/random): it stops the process at a
// moment it holds a lock, and returns its locks read while it is
// stopped.
func (p *bankProc) stopHoldingPid(ctx context.Context, t *testing.T, db *percolator.DB, pid int) []percolator.LockInfo {
	t.Helper()
	mark := "/" + strconv.Itoa(pid) + "/"
	for try := 1; try <= 100; try++ {
		p.signal(t, syscall.SIGSTOP)
		waitStopped(t, pid)
		locks, err := db.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var held []percolator.LockInfo
		for _, l := range locks {
			if strings.Contains(l.Lock.Owner, mark) {
				held = append(held, l)
			}
		}
		if len(held) > 0 {
			return held
		}
		p.signal(t, syscall.SIGCONT)
		time.Sleep(time.Duration(20+try) * time.Millisecond)
	}
	t.Fatalf("bank %s held no lock at any of 100 stops", p.name)
	return nil
}

// downProc is a client process (bank, worker) of a server that the test
// takes away.
type downProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	stdout *lockedBuffer
	exited chan struct{} // closed when Wait returned
}

func startDownProc(t *testing.T, args ...string) *downProc {
	t.Helper()
	p := &downProc{cmd: command(args...), stderr: &lockedBuffer{}, stdout: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd.Stderr, p.cmd.Stdout = p.stderr, p.stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%v stderr:\n%s", args[0], p.stderr)
		}
	})
	return p
}

// running reports whether the process has not exited yet.
func (p *downProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// wait waits for the process to exit and returns its status; within
// only detects a hang.
func (p *downProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("%v did not exit within %v", p.cmd.Args[1:], within)
		return -1
	}
}

// waitFor waits until the process's stderr or stdout holds s.
func (p *downProc) waitFor(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(p.stderr.String()+p.stdout.String(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) || !p.running() {
			t.Fatalf("%v never printed %q:\n%s%s", p.cmd.Args[1:], s, p.stdout, p.stderr)
		}
	}
}

// checkGaveUp waits for the process to exit on its own (within bound,
// which only detects a hang) and checks it failed (exit 1) with an error
// naming addr as unavailable.
func (p *downProc) checkGaveUp(t *testing.T, addr string, bound time.Duration) {
	t.Helper()
	start := time.Now()
	code := p.wait(t, bound)
	errOut := p.stderr.String()
	if code != 1 || !strings.Contains(errOut, addr) || !strings.Contains(errOut, "unavailable") {
		t.Fatalf("%v with its server gone: exit %d; want 1 and an error naming %s as unavailable:\n%s", p.cmd.Args[1:], code, addr, errOut)
	}
	t.Logf("%v gave up %v after the server went: %s", p.cmd.Args[1], time.Since(start).Round(time.Millisecond), lastLine(errOut))
}

// checkSignal sends sig and checks the process exits with want within 10s
// (a hang bound: the cleanup budget is 1s, the retry budget 30s).
func (p *downProc) checkSignal(t *testing.T, sig syscall.Signal, want int) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := p.wait(t, 10*time.Second); code != want {
		t.Fatalf("%v after %v with its server down: exit %d, want %d", p.cmd.Args[1:], sig, code, want)
	}
	t.Logf("%v exited %v after %v with its server down", p.cmd.Args[1], time.Since(start).Round(time.Millisecond), sig)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// serverDownCase is one way a server goes away for good: its process
// killed (connections refused), or a proxy in front of it blackholing
// every connection (TCP stays open, nothing comes back).
type serverDownCase struct {
	name string
	// start serves a fresh directory and returns the address the clients
	// use and the function that takes the server away.
	start func(t *testing.T) (addr string, down func())
}

var serverDownCases = []serverDownCase{
	{"killed", func(t *testing.T) (string, func()) {
		addr := freeAddr(t)
		srv := serveProc(t, t.TempDir(), addr)
		return addr, func() { killProc(srv) }
	}},
	{"blackholed", func(t *testing.T) (string, func()) {
		addr := freeAddr(t)
		serveProc(t, t.TempDir(), addr)
		p, err := faultproxy.New(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p.Addr(), func() { p.SetBlackhole(true) }
	}},
}

// TestBankServerStaysDown: `bank --server` whose server goes away and
// stays away fails (exit 1) within its retry budget (3s here) with an
// error naming the server; it used to retry each call, and each abort's
// cleanup call, for a budget of its own.
func TestBankServerStaysDown(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	for _, c := range serverDownCases {
		t.Run(c.name, func(t *testing.T) {
			addr, down := c.start(t)
			p := startDownProc(t, "bank", "--server", addr, "--retry-budget", "3s", "--accounts", "10", "--workers", "4",
				"--readers", "1", "--duration", "10m", "--ack", "--quiet")
			p.waitFor(t, "ack ")
			down()
			p.checkGaveUp(t, addr, time.Minute)
		})
	}
}

// TestBankSignalWhileServerDown: `bank --server` stops on SIGINT (130)
// and SIGTERM (143) while its server is down and its calls are being
// retried (default budget, 30s): at once, after a bounded cleanup. It
// used to finish each abort's rollback for the whole budget first.
func TestBankSignalWhileServerDown(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	for i, c := range serverDownCases {
		sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[i%2]
		t.Run(c.name, func(t *testing.T) {
			addr, down := c.start(t)
			p := startDownProc(t, "bank", "--server", addr, "--accounts", "10", "--workers", "4",
				"--readers", "1", "--duration", "10m", "--ack", "--quiet")
			p.waitFor(t, "ack ")
			down()
			time.Sleep(time.Second) // mid-retry
			p.checkSignal(t, sig, 128+int(sig))
		})
	}
}

// TestWorkerServerStaysDown: `worker --server` whose server goes away and
// stays away fails (exit 1) within its retry budget with an error naming
// the server.
func TestWorkerServerStaysDown(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	for _, c := range serverDownCases {
		t.Run(c.name, func(t *testing.T) {
			addr, down := c.start(t)
			p := startDownProc(t, "worker", "--server", addr, "--retry-budget", "3s", "--scanners", "2")
			p.waitFor(t, "running the index observers")
			time.Sleep(500 * time.Millisecond) // scanning
			down()
			p.checkGaveUp(t, addr, time.Minute)
		})
	}
}

// TestWorkerSignalWhileServerDown: `worker --server` stops on SIGTERM and
// SIGINT while its server is down, exiting 0 as a worker stopped by a
// signal does (main.go), after a bounded cleanup: it used to flush its
// counters for a retry budget per counter first.
func TestWorkerSignalWhileServerDown(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	for i, c := range serverDownCases {
		sig := []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}[i%2]
		t.Run(c.name, func(t *testing.T) {
			addr, down := c.start(t)
			p := startDownProc(t, "worker", "--server", addr, "--scanners", "2")
			p.waitFor(t, "running the index observers")
			time.Sleep(500 * time.Millisecond) // scanning
			down()
			time.Sleep(time.Second) // mid-retry
			p.checkSignal(t, sig, 0)
		})
	}
}

// TestFaultSuiteBankNemesisThenServerGone (PERCOLATOR_FAULT_SUITE=1): `bank
// --server` runs through a proxy that cuts, blackholes (up to 1s) and
// delays its connections at random for 20s, with a retry budget of 10s:
// it rides out every fault (no operation goes 10s without an answer), and
// when the server is then killed and left down it fails within the budget
// naming the server. The bank's totals are conserved and every transfer
// it acknowledged is there, read from the restarted server.
func TestFaultSuiteBankNemesisThenServerGone(t *testing.T) {
	if os.Getenv("PERCOLATOR_FAULT_SUITE") == "" {
		t.Skip("a 20s fault soak; set PERCOLATOR_FAULT_SUITE=1 to run it")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	srv := serveProc(t, dir, addr)
	p, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const accounts = 20
	b := startBankProc(t, "A", nil, []string{"--server", p.Addr(), "--retry-budget", "10s"}, accounts)
	b.waitAcks(t, 1, time.Minute)
	n, err := faultproxy.StartNemesis(faultproxy.NemesisOptions{
		Duration: 20 * time.Second, CutRate: 1, BlackholeRate: 0.5, DelayRate: 1, Logf: t.Logf,
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	<-n.Done()
	before := len(b.ackedRows())
	b.waitAcks(t, before+1, time.Minute) // it rode the faults out
	select {
	case <-b.done:
		t.Fatalf("bank exited during the faults:\n%s", b.stderr)
	default:
	}
	start := time.Now()
	killProc(srv)
	select { // its stdout read to the end before Wait
	case <-b.done:
	case <-time.After(time.Minute):
		t.Fatal("bank did not exit within a minute of its server's kill (retry budget 10s)")
	}
	code := waitExit(t, b.cmd, time.Minute)
	if code != 1 || !strings.Contains(b.stderr.String(), p.Addr()) || !strings.Contains(b.stderr.String(), "unavailable") {
		t.Fatalf("bank with its server gone: exit %d, want 1 naming %s as unavailable:\n%s", code, p.Addr(), b.stderr)
	}
	t.Logf("%d transfers acknowledged; bank gave up %v after the kill", len(b.ackedRows()), time.Since(start).Round(time.Millisecond))
	serveProc(t, dir, addr)
	checkServerBank(t, addr, accounts, b.ackedRows())
}

// TestOpenWaitsForRestartingServer: a client started while its server is
// down (restarting) waits for it within the retry budget, instead of
// failing at once; one whose server does not come back within the budget
// fails naming it.
func TestOpenWaitsForRestartingServer(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	p := startDownProc(t, "bank", "--server", addr, "--accounts", "10", "--workers", "2", "--duration", "500ms", "--quiet")
	time.Sleep(time.Second) // the bank is dialing a port nothing listens on
	if !p.running() {
		t.Fatalf("bank gave up on a server that is restarting:\n%s", p.stderr)
	}
	serveProc(t, dir, addr)
	if code := p.wait(t, time.Minute); code != 0 || !strings.Contains(p.stdout.String(), "wrong totals: 0") {
		t.Fatalf("bank once its server came up: exit %d\n%s%s", code, p.stdout, p.stderr)
	}

	gone := freeAddr(t)
	q := startDownProc(t, "bank", "--server", gone, "--retry-budget", "1s", "--quiet")
	q.checkGaveUp(t, gone, time.Minute)
}
