package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/coord/etcd"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/storage/bigtable"
	"github.com/seed-992972ee/percolator/txn"
)

// pauseTTL is the paused bank's --session-ttl: etcd's minimum.
const pauseTTL = etcd.MinTTL

// pauseLockTTL is the paused bank's --lock-ttl: longer than the test, so
// that its locks are resolved by its liveness alone.
const pauseLockTTL = 10 * time.Minute

// pauseResolveWithin bounds how long after a stop B may take to resolve
// the paused process's locks on the accounts.
const pauseResolveWithin = 30 * pauseTTL

// TestBankPausedPastLease: two `bank` processes (A and B) on one Bigtable
// table, with etcd sessions of 2s, and one `percolator oracle`. Three
// times, A is stopped with SIGSTOP at a moment it holds a primary lock
// (the test reads the store's locks with A stopped, and lets it go on
// and tries again if it holds none), and kept stopped for 3 TTLs. While
// it is stopped: etcd expires its lease, so its liveness key goes (the
// test waits for that: --session-ttl is honoured), and B, finding A's
// locks on the accounts in its way, judges their owner dead and resolves
// every one of them; the fate of each transaction A had locks of is then
// decided at its primary (committed or rolled back). Then A is continued
// (SIGCONT). A runs with --lock-ttl 10m, so its locks outlast the test:
// only its liveness can let B resolve them. (With the default 10s TTL, a
// busy machine let them expire first, and B resolved them by their TTL,
// which is not what the test checks.)
//
// The designed behaviour (coord/etcd doc.go, invariant 4): A's session
// finds its lease gone, logs it and is granted a new one under the same
// owner, so its liveness key comes back, and A goes on transferring. Its
// commits in flight are refused: one that reaches its session check
// before the new lease fails with ErrSessionLost, one after it fails at
// the primary's CheckAndMutate (the lock B rolled back is gone); either
// way bank's Update retries the transfer as a new transaction. So: no
// transaction decided while A was stopped changes its fate after A
// resumes, and every cell A had locked ends with its primary's fate
// (nothing half applied); at the end, bank totals are conserved, every
// acknowledged transfer is there, neither process saw a wrong snapshot
// total, and both exit on SIGINT as designed (130).
func TestBankPausedPastLease(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess test")
	}
	start := time.Now()
	// The test's own store and etcd calls end with it: a stall fails it
	// with a message rather than at the go test timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	env := emulatorEnv(emu.Addr()) // the banks'
	const table = "test/test/pause"
	bopts := bigtable.Options{Emulator: emu.Addr()}
	_ = bopts.ParseTable(table)
	if err := bigtable.Init(ctx, bopts); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.Start(t)
	cli := etcdtest.Client(t, m)
	waitLeader(t, cli, 20*time.Second, startOracleProc(t, m, oracleLease))

	const accounts = 20
	target := []string{"--bigtable", table, "--etcd", strings.Join(m.Endpoints(), ","), "--session-ttl", pauseTTL.String()}
	a := startBankProc(t, "A", env, append(slices.Clip(target), "--lock-ttl", pauseLockTTL.String()), accounts)
	a.waitAcks(t, 1, 30*time.Second) // A created the accounts
	b := startBankProc(t, "B", env, target, accounts)
	b.waitAcks(t, 1, 30*time.Second)
	aOwner := ownerOfPid(t, cli, a.cmd.Process.Pid)

	copts := cluster.Options{Bigtable: bopts, Etcd: m.Endpoints()}
	copts.DB.Logger = discardLog()
	db, err := cluster.Open(ctx, copts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var seen []*pausedTxn
	rolledBack := 0
	for round := 1; round <= 3; round++ {
		txns := pauseRound(ctx, t, round, cli, db.DB, a, aOwner)
		for _, x := range txns {
			if !x.committed {
				rolledBack++
			}
		}
		seen = append(seen, txns...)
	}
	if rolledBack == 0 {
		t.Fatal("no transaction of A was rolled back while it was stopped: the test checked no refused commit")
	}

	aOut, bOut := a.interrupt(t), b.interrupt(t)
	t.Logf("A: %s", aOut)
	t.Logf("B: %s", bOut)
	if n := strings.Count(a.stderr.String(), "session lease expired; granting a new one"); n < 3 {
		t.Errorf("A's session reported its lease expired %d times, want one per pause (3):\n%s", n, a.stderr.String())
	}

	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	if _, err := db.ResolveLocks(cctx); err != nil {
		t.Fatal(err)
	}
	if locks, err := db.Locks(cctx); err != nil || len(locks) != 0 {
		t.Fatalf("after both banks ended and a resolution: %d locks (%v)", len(locks), err)
	}
	for _, x := range seen {
		x.checkSettled(cctx, t, db.DB)
	}
	acked := append(a.ackedRows(), b.ackedRows()...)
	checkBankTotals(cctx, t, db.DB, accounts, acked)
	t.Logf("%d transactions of A seen at the stops, %d of them rolled back while A was stopped; %d transfers acknowledged (A %d, B %d); %v in all",
		len(seen), rolledBack, len(acked), len(a.ackedRows()), len(b.ackedRows()), time.Since(start).Round(time.Millisecond))
}

// pauseRound stops A while it holds a primary lock, waits until it is
// seen dead and B has resolved its locks on the accounts, and continues it
// 3 TTLs after the stop; it returns A's transactions seen at the stop,
// with their fate as decided while A was stopped.
func pauseRound(ctx context.Context, t *testing.T, round int, cli *clientv3.Client, db *percolator.DB, a *bankProc, owner string) []*pausedTxn {
	t.Helper()
	held := a.stopHolding(ctx, t, db, owner)
	stopped := time.Now()
	expires := held[0].Expires
	for _, l := range held {
		expires = minTime(expires, l.Expires)
	}
	waitOwnerLive(t, cli, owner, false, 5*pauseTTL)
	dead := time.Since(stopped)
	// B resolves them: every primary of A is an account (a transfer's
	// first write), and B's reader scans every account.
	for ; ; time.Sleep(20 * time.Millisecond) {
		n, err := accountLocksOf(ctx, db, owner)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(expires) || time.Since(stopped) > pauseResolveWithin {
			t.Fatalf("round %d: %d of A's locks on the accounts still there %v after the stop (they expire %v after it): B did not resolve them by A's liveness",
				round, n, time.Since(stopped).Round(time.Millisecond), expires.Sub(stopped).Round(time.Millisecond))
		}
	}
	resolved := time.Since(stopped)
	txns := pausedTxns(held)
	for _, x := range txns {
		x.decide(ctx, t, db, round)
	}
	time.Sleep(time.Until(stopped.Add(3 * pauseTTL)))
	acks := len(a.ackedRows())
	a.signal(t, syscall.SIGCONT)
	cont := time.Now()
	waitOwnerLive(t, cli, owner, true, 5*pauseTTL)
	live := time.Since(cont)
	a.waitAcks(t, acks+1, 10*pauseTTL)
	rb := 0
	for _, x := range txns {
		if !x.committed {
			rb++
		}
	}
	t.Logf("round %d: A stopped holding %d locks of %d transactions (%d primaries); seen dead %v after the stop; B resolved its account locks %v after it (%d rolled back, %d committed); continued after %v; live again %v and acknowledging %v after SIGCONT",
		round, len(held), len(txns), countPrimaries(held), dead.Round(time.Millisecond), resolved.Round(time.Millisecond), rb, len(txns)-rb,
		cont.Sub(stopped).Round(time.Millisecond), live.Round(time.Millisecond), time.Since(cont).Round(time.Millisecond))
	return txns
}

// bankProc is a `bank --ack` process: its acknowledged rows, its other
// output lines and its stderr.
type bankProc struct {
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{} // stdout closed

	mu    sync.Mutex
	acked []string
	other strings.Builder
}

// startBankProc starts bank on target with accounts accounts, 4 transfer
// workers and a reader, for longer than the test (it ends on SIGINT); env
// is added to its environment.
func startBankProc(t *testing.T, name string, env, target []string, accounts int) *bankProc {
	t.Helper()
	p := &bankProc{name: name, stderr: &lockedBuffer{}, done: make(chan struct{})}
	args := append([]string{"bank"}, target...)
	p.cmd = commandEnv(env, append(args, "--accounts", strconv.Itoa(accounts), "--workers", "4", "--readers", "1",
		"--duration", "10m", "--ack", "--quiet")...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			killProc(p.cmd)
		}
		if t.Failed() {
			t.Logf("bank %s stderr:\n%s", p.name, p.stderr)
		}
	})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			if row, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				p.acked = append(p.acked, row)
			} else {
				p.other.WriteString(sc.Text() + "\n")
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *bankProc) ackedRows() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...)
}

// waitAcks waits until the process has acknowledged n transfers.
func (p *bankProc) waitAcks(t *testing.T, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); len(p.ackedRows()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("bank %s acknowledged %d transfers in %v, want %d; stderr:\n%s", p.name, len(p.ackedRows()), within, n, p.stderr)
		}
	}
}

func (p *bankProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("bank %s: %v: %v", p.name, sig, err)
	}
}

// stopHolding stops the process (SIGSTOP) at a moment it holds the lock
// of a primary: it lets it go on and tries again until it does. It
// returns owner's locks read with the process stopped.
func (p *bankProc) stopHolding(ctx context.Context, t *testing.T, db *percolator.DB, owner string) []percolator.LockInfo {
	t.Helper()
	for try := 1; try <= 50; try++ {
		p.signal(t, syscall.SIGSTOP)
		waitStopped(t, p.cmd.Process.Pid)
		locks, err := db.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var held []percolator.LockInfo
		for _, l := range locks {
			if l.Lock.Owner == owner {
				held = append(held, l)
			}
		}
		if countPrimaries(held) > 0 {
			return held
		}
		p.signal(t, syscall.SIGCONT)
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	}
	t.Fatalf("bank %s held no primary lock at any of 50 stops", p.name)
	return nil
}

// interrupt ends the process with SIGINT, as designed (exit 130 after
// printing its summary), and returns its summary; it fails the test on
// a wrong snapshot total.
func (p *bankProc) interrupt(t *testing.T) string {
	t.Helper()
	p.signal(t, syscall.SIGINT)
	<-p.done
	err := p.cmd.Wait()
	p.mu.Lock()
	out := strings.TrimSpace(p.other.String())
	p.mu.Unlock()
	if code := p.cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("bank %s after SIGINT: %v, want exit 130; stdout:\n%s\nstderr:\n%s", p.name, err, out, p.stderr)
	}
	if !strings.Contains(out, "(wrong totals: 0)") || strings.Contains(out+p.stderr.String(), "WRONG SNAPSHOT") {
		t.Errorf("bank %s saw wrong totals or printed no summary:\n%s\n%s", p.name, out, p.stderr)
	}
	return out
}

// ownerOfPid returns the owner of the liveness key of process pid
// (coord.NewOwnerID is host/pid/random).
func ownerOfPid(t *testing.T, cli *clientv3.Client, pid int) string {
	t.Helper()
	prefix := etcd.DefaultPrefix + "live/"
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		owner := strings.TrimPrefix(string(kv.Key), prefix)
		if parts := strings.Split(owner, "/"); len(parts) == 3 && parts[1] == strconv.Itoa(pid) {
			return owner
		}
	}
	t.Fatalf("no liveness key of process %d among %d", pid, len(resp.Kvs))
	return ""
}

// waitOwnerLive waits until owner's liveness key exists (live) or not.
func waitOwnerLive(t *testing.T, cli *clientv3.Client, owner string, live bool, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		gctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := cli.Get(gctx, etcd.DefaultPrefix+"live/"+owner, clientv3.WithCountOnly())
		cancel()
		if err == nil && (resp.Count > 0) == live {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's liveness key: present %v, want %v within %v (%v)", owner, err == nil && resp.Count > 0, live, within, err)
		}
	}
}

// accountLocksOf counts owner's locks on the accounts.
func accountLocksOf(ctx context.Context, db *percolator.DB, owner string) (int, error) {
	locks, err := db.Locks(ctx)
	n := 0
	for _, l := range locks {
		if l.Lock.Owner == owner && strings.HasPrefix(string(l.Row), "acct/") {
			n++
		}
	}
	return n, err
}

func countPrimaries(locks []percolator.LockInfo) int {
	n := 0
	for _, l := range locks {
		if string(l.Row) == string(l.Lock.PrimaryRow) && l.Column == l.Lock.PrimaryCol {
			n++
		}
	}
	return n
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// cellRef names a cell.
type cellRef struct{ row, col string }

// pausedTxn is a transaction of the paused process seen at a stop: its
// primary, the cells it had locked then, and its fate as decided at the
// primary while the process was stopped.
type pausedTxn struct {
	startTS   uint64
	primary   cellRef
	cells     []cellRef
	committed bool
}

// pausedTxns groups locks by transaction.
func pausedTxns(locks []percolator.LockInfo) []*pausedTxn {
	byTS := make(map[uint64]*pausedTxn)
	var out []*pausedTxn
	for _, l := range locks {
		x := byTS[l.StartTS]
		if x == nil {
			x = &pausedTxn{startTS: l.StartTS, primary: cellRef{string(l.Lock.PrimaryRow), l.Lock.PrimaryCol}}
			byTS[l.StartTS] = x
			out = append(out, x)
		}
		x.cells = append(x.cells, cellRef{string(l.Row), l.Column})
	}
	return out
}

// decide records the transaction's fate at its primary, which must be
// decided (the process is stopped and judged dead).
func (x *pausedTxn) decide(ctx context.Context, t *testing.T, db *percolator.DB, round int) {
	t.Helper()
	f, err := cellFate(ctx, db, x.primary, x.startTS)
	if err != nil {
		t.Fatal(err)
	}
	if f != fateCommitted && f != fateRolledBack {
		t.Fatalf("round %d: transaction %d of the stopped process is %s at its primary %v after its account locks were resolved", round, x.startTS, f, x.primary)
	}
	x.committed = f == fateCommitted
}

// checkSettled checks, once every lock is resolved, that the
// transaction's fate at its primary is the one decided while its process
// was stopped, and that every cell it had locked has that fate too.
func (x *pausedTxn) checkSettled(ctx context.Context, t *testing.T, db *percolator.DB) {
	t.Helper()
	want := fateRolledBack
	if x.committed {
		want = fateCommitted
	}
	cells := x.cells
	if !slices.Contains(cells, x.primary) {
		cells = append(cells, x.primary)
	}
	for _, c := range cells {
		f, err := cellFate(ctx, db, c, x.startTS)
		if err != nil {
			t.Fatal(err)
		}
		if f != want {
			t.Errorf("transaction %d of the paused process, decided %s while it was stopped: %v is %s at the end", x.startTS, want, c, f)
		}
	}
}

type fate string

const (
	fateLocked     fate = "locked"
	fateCommitted  fate = "committed"
	fateRolledBack fate = "rolled back"
	fateBoth       fate = "committed over its rollback"
	fateNone       fate = "without a record"
)

// cellFate reads what the transaction that started at startTS left at c.
func cellFate(ctx context.Context, db *percolator.DB, c cellRef, startTS uint64) (fate, error) {
	cells, err := db.RawRow(ctx, c.row)
	if err != nil {
		return "", err
	}
	var locked, committed, rolledBack bool
	for _, cell := range cells {
		if cell.Qualifier != c.col {
			continue
		}
		switch cell.Family {
		case txn.FamilyLock:
			locked = locked || cell.TS == startTS
		case txn.FamilyWrite:
			w, err := txn.DecodeWrite(cell.Value)
			if err != nil {
				return "", fmt.Errorf("%v at %d: %w", c, cell.TS, err)
			}
			rolledBack = rolledBack || w.Op == txn.OpRollback && cell.TS == startTS
			committed = committed || w.Op != txn.OpRollback && w.StartTS == startTS
		}
	}
	switch {
	case committed && rolledBack:
		return fateBoth, nil
	case locked:
		return fateLocked, nil
	case committed:
		return fateCommitted, nil
	case rolledBack:
		return fateRolledBack, nil
	}
	return fateNone, nil
}
