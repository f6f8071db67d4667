package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// TestIndexRidesOutEtcdOutage: `index` with two `worker` processes on
// Bigtable, etcd a process of its own behind a proxy. Mid-run etcd is
// killed with SIGKILL and restarted, and the proxy then cuts every
// client's connection twice: index finishes and verifies against a batch
// build, and the workers are still running. (index used to exit 1,
// "etcd: taking an advisory lock: ... EOF", and workers likewise.)
func TestIndexRidesOutEtcdOutage(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	ctx := context.Background()
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	env := emulatorEnv(emu.Addr()) // the children's
	const table = "test/test/etcdoutage"
	bopts := bigtable.Options{Emulator: emu.Addr()}
	_ = bopts.ParseTable(table)
	if err := bigtable.Init(ctx, bopts); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.StartProcess(t, etcdtest.ProcessOptions{})
	p, err := faultproxy.New(m.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	endpoints := "http://" + p.Addr()
	waitLeader(t, m.Client(t), 20*time.Second, startOracleProcEnv(t, strings.Join(m.Endpoints(), ","), oracleLease, env, "--bigtable", table))

	exited := make(chan int, 2)
	for i := range 2 {
		w := commandEnv(env, "worker", "--bigtable", table, "--etcd", endpoints, "--scanners", "2")
		var out lockedBuffer
		w.Stdout, w.Stderr = &out, &out
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = w.Wait(); close(done); exited <- i }()
		t.Cleanup(func() {
			_ = w.Process.Signal(syscall.SIGKILL)
			<-done
			if t.Failed() {
				t.Logf("worker %d:\n%s", i, out.String())
			}
		})
	}
	idx := commandEnv(env, "index", "--bigtable", table, "--etcd", endpoints, "--quiet", "--scanners", "2", "--verify", bigCorpus(t, 50))
	var idxOut lockedBuffer
	idx.Stdout, idx.Stderr = &idxOut, &idxOut
	if err := idx.Start(); err != nil {
		t.Fatal(err)
	}
	idxDone := make(chan error, 1)
	go func() { idxDone <- idx.Wait() }()

	time.Sleep(1500 * time.Millisecond)
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		time.Sleep(500 * time.Millisecond)
		p.Cut()
	}
	// Fifty documents keep the index's observers busy for tens of seconds on
	// two cores, well past the outage's four; a machine that finished them
	// sooner tested less, and says so.
	select {
	case err := <-idxDone:
		idxDone <- err
		t.Logf("the index finished before the outage ended: only its start rode it out")
	default:
	}
	select {
	case err := <-idxDone:
		if err != nil {
			t.Fatalf("index through the etcd outage: %v\n%s", err, idxOut.String())
		}
	case <-time.After(4 * time.Minute): // only a hang reaches it
		_ = idx.Process.Signal(syscall.SIGQUIT)
		<-idxDone
		t.Fatalf("index did not finish; its goroutines:\n%s", ourGoroutines(idxOut.String()))
	}
	if !strings.Contains(idxOut.String(), "equals a from-scratch batch build") {
		t.Fatalf("index did not verify:\n%s", idxOut.String())
	}
	select {
	case i := <-exited:
		t.Fatalf("worker %d exited during the outage", i)
	default:
	}
	t.Logf("index:\n%s", idxOut.String())
}

// ourGoroutines keeps, of a Go goroutine dump, the goroutines with a frame
// in this module (the runtime's own are noise), so that a hang's report
// fits in a test log.
func ourGoroutines(dump string) string {
	head, rest, ok := strings.Cut(dump, "\ngoroutine ")
	if !ok {
		return dump
	}
	var b strings.Builder
	b.WriteString(head)
	for g := range strings.SplitSeq(rest, "\ngoroutine ") {
		if strings.Contains(g, "seed-992972ee/percolator") {
			b.WriteString("\ngoroutine ")
			b.WriteString(g)
		}
	}
	return b.String()
}
