package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord/etcd/etcdtest"
	"github.com/seed-992972ee/percolator/storage/bigtable"
)

// TestWorkerPausedPastLease: a `worker` stopped (SIGSTOP) for three times
// its session's lease, while an index run leaves it notifications to
// process, comes back under a new lease when continued and goes on
// working; it exits 0 on SIGTERM. (It used to exit 1, "requested lease
// not found", when a scanner met the lost lease first.)
func TestWorkerPausedPastLease(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	ctx := context.Background()
	emu, err := bigtable.StartEmulator("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	env := emulatorEnv(emu.Addr()) // the children's
	const table = "test/test/workerpause"
	bopts := bigtable.Options{Emulator: emu.Addr()}
	_ = bopts.ParseTable(table)
	if err := bigtable.Init(ctx, bopts); err != nil {
		t.Fatal(err)
	}
	m := etcdtest.Start(t)
	endpoints := strings.Join(m.Endpoints(), ",")
	waitLeader(t, etcdtest.Client(t, m), 20*time.Second, startOracleProcEnv(t, endpoints, oracleLease, env, "--bigtable", table))

	w := commandEnv(env, "worker", "--bigtable", table, "--etcd", endpoints, "--scanners", "4", "--session-ttl", pauseTTL.String())
	var wOut lockedBuffer
	w.Stdout, w.Stderr = &wOut, &wOut
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{}) // closed when the worker exited (waitErr)
	go func() { waitErr = w.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = w.Process.Signal(syscall.SIGCONT)
		_ = w.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("worker:\n%s", wOut.String())
		}
	})
	src := bigCorpus(t, 40)
	index := func() {
		t.Helper()
		out, code := runExit(t, commandEnv(env, "index", "--bigtable", table, "--etcd", endpoints, "--quiet", "--verify", src))
		if code != 0 || !strings.Contains(out, "equals a from-scratch batch build") {
			t.Fatalf("index: exit %d\n%s", code, out)
		}
	}
	index()
	for round := range 2 {
		if err := w.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		for i := range 30 { // notifications waiting when it wakes up
			name := filepath.Join(src, fmt.Sprintf("paused-%d-%d.txt", round, i))
			if err := os.WriteFile(name, []byte(fmt.Sprintf("words of round %d file %d", round, i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		index()
		time.Sleep(3 * pauseTTL)
		if err := w.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute) // only a hang reaches it
		for strings.Count(wOut.String(), "granting a new one") <= round {
			select {
			case <-done:
				t.Fatalf("the worker exited after its pause: %v\n%s", waitErr, wOut.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the worker did not report its lease lost and granted again\n%s", wOut.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	index()
	select {
	case <-done:
		t.Fatalf("the worker exited: %v\n%s", waitErr, wOut.String())
	default:
	}
	_ = w.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("worker after SIGTERM: %v (want exit 0)\n%s", waitErr, wOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("worker did not exit after SIGTERM\n%s", wOut.String())
	}
}
