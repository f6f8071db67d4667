package main

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/cluster"
	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// TestDistributedFailover: the distributed deployment for real — the
// Bigtable emulator and an etcd member (in this process), two `percolator
// oracle` processes (one with --bigtable), three `worker` processes,
// `bank` and `index` running together on one table. Mid-run the leading oracle and one worker are
// killed with SIGKILL. bank's totals are conserved and no acknowledged
// transfer is lost; its snapshot readers saw no wrong total; every client's
// timestamps stayed strictly increasing across the failover (oracle.Client
// refuses a reply that is not above the last, which would fail the run);
// the index equals a batch build.
func TestDistributedFailover(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocess soak")
	}
	ctx := context.Background()
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	env := emulatorEnv(emu.Addr()) // the children's
	const table = "test/test/dist"
	bopts := bigtable.Options{Emulator: emu.Addr()}
	_ = bopts.ParseTable(table)
	if err := bigtable.Init(ctx, bopts); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.Start(t)
	endpoints := strings.Join(m.Endpoints(), ",")
	cli := etcdtest.Client(t, m)
	oracles := []*oracleProc{
		startOracleProcEnv(t, endpoints, oracleLease, env, "--bigtable", table),
		startOracleProcEnv(t, endpoints, oracleLease, env, "--bigtable", table),
	}
	leader := waitLeader(t, cli, 20*time.Second, oracles...)

	workers := make([]*exec.Cmd, 3)
	for i := range workers {
		workers[i] = commandEnv(env, "worker", "--bigtable", table, "--etcd", endpoints, "--scanners", "2")
		if err := workers[i].Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killProc(workers[i]) })
	}

	const accounts = 30
	bank := commandEnv(env, "bank", "--bigtable", table, "--etcd", endpoints, "--accounts", "30", "--workers", "4", "--readers", "1",
		"--duration", "12s", "--ack", "--quiet")
	bankOut, err := bank.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var bankErr lockedBuffer
	bank.Stderr = &bankErr
	var (
		mu    sync.Mutex
		acked []string
		other strings.Builder
	)
	readDone := make(chan struct{})
	if err := bank.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(bankOut)
		for sc.Scan() {
			mu.Lock()
			if row, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				acked = append(acked, row)
			} else {
				other.WriteString(sc.Text() + "\n")
			}
			mu.Unlock()
		}
	}()
	src := bigCorpus(t, 60) // the index runs well past the kill at three to five seconds
	idx := commandEnv(env, "index", "--bigtable", table, "--etcd", endpoints, "--quiet", "--scanners", "2", "--verify", src)
	var idxOut lockedBuffer
	idx.Stdout, idx.Stderr = &idxOut, &idxOut
	if err := idx.Start(); err != nil {
		t.Fatal(err)
	}

	time.Sleep(time.Duration(3000+rand.IntN(2000)) * time.Millisecond)
	killed := time.Now()
	killProc(leader.cmd)
	killProc(workers[0])
	t.Logf("killed the leading oracle %s and a worker", leader.addr)
	next := waitLeader(t, cli, 20*time.Second, oracles...)
	t.Logf("oracle %s leads %v after the kill", next.addr, time.Since(killed).Round(time.Millisecond))

	// The live workers split the notify keyspace through etcd, and status
	// shows their ranges (published while they run).
	var statusOut string
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, code := runExit(t, commandEnv(env, "status", "--bigtable", table, "--etcd", endpoints))
		if code != 0 {
			t.Fatalf("status: exit %d: %s", code, out)
		}
		if statusOut = out; strings.Contains(out, "partitions of the notify keyspace") || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(statusOut, "partitions of the notify keyspace") {
		t.Fatalf("status shows no partitions while 2 workers and index run:\n%s", statusOut)
	}

	idxDone := make(chan error, 1)
	go func() { idxDone <- idx.Wait() }()
	select {
	case err := <-idxDone:
		if err != nil {
			t.Fatalf("index: %v\n%s", err, idxOut.String())
		}
	case <-time.After(3 * time.Minute):
		// Stuck: have it print its goroutines (SIGQUIT) before failing.
		_ = idx.Process.Signal(syscall.SIGQUIT)
		<-idxDone
		t.Fatalf("index did not finish within 3 minutes; its goroutines:\n%s", ourGoroutines(idxOut.String()))
	}
	if !strings.Contains(idxOut.String(), "equals a from-scratch batch build") {
		t.Fatalf("index did not verify:\n%s", idxOut.String())
	}
	err = bank.Wait()
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("bank across the failover: %v\n%s%s", err, other.String(), bankErr.String())
	}
	if len(acked) == 0 {
		t.Fatal("no transfer was acknowledged: the test checked nothing")
	}
	t.Logf("%d transfers acknowledged; bank: %s", len(acked), strings.TrimSpace(other.String()))

	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	opts := cluster.Options{Bigtable: bopts, Etcd: m.Endpoints()}
	opts.DB.LockTTL = time.Hour // the dead worker's locks go by its liveness, not by their TTL
	db, err := cluster.Open(cctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkBankTotals(cctx, t, db.DB, accounts, acked)
}
