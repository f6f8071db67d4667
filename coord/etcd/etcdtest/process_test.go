//go:build linux

package etcdtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/internal/faultproxy"
)

// hang bounds a wait that only a bug makes long; no test waits for it to
// pass.
const hang = 60 * time.Second

// eventually calls f, each time with a short deadline, until it returns
// nil; it fails the test if that takes a hang.
func eventually(t *testing.T, what string, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after %v", what, err, hang)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getValue returns the value of key, or an error if it is missing.
func getValue(ctx context.Context, cli *clientv3.Client, key string) (string, error) {
	r, err := cli.Get(ctx, key)
	if err != nil {
		return "", err
	}
	if len(r.Kvs) == 0 {
		return "", errors.New("no such key")
	}
	return string(r.Kvs[0].Value), nil
}

// failsWithin runs a call bounded by a short context and checks that it
// fails and returns: a call to a dead member must not outlive its context.
func failsWithin(t *testing.T, what string, call func(ctx context.Context) error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		errc <- call(ctx)
	}()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatalf("%s succeeded", what)
		}
	case <-time.After(hang):
		t.Fatalf("%s did not return after its 1s context ended", what)
	}
}

// A client through a proxy writes, the member is killed with SIGKILL,
// calls fail within their context, and after a restart the same client
// reconnects by itself and reads what it wrote before the kill.
func TestProcessKillRestartThroughProxy(t *testing.T) {
	m := StartProcess(t, ProcessOptions{})
	px, err := faultproxy.New(m.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	cli := ClientAt(t, "http://"+px.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "before the kill"); err != nil {
		t.Fatal(err)
	}
	if len(packageGoroutines()) == 0 {
		t.Fatal("no Process goroutine found while a member runs: the leak check cannot see them")
	}
	pid := m.PID()
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if m.PID() != 0 {
		t.Fatal("PID() is not 0 after Kill")
	}
	if _, err := procState(pid); err == nil {
		t.Fatalf("process %d still exists after Kill", pid)
	}
	failsWithin(t, "Get from a killed member", func(ctx context.Context) error {
		_, err := cli.Get(ctx, "k")
		return err
	})
	failsWithin(t, "Put to a killed member", func(ctx context.Context) error {
		_, err := cli.Put(ctx, "k", "while down")
		return err
	})

	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "read after the restart", func(ctx context.Context) error {
		v, err := getValue(ctx, cli, "k")
		if err == nil && v != "before the kill" {
			t.Fatalf("after the restart k = %q, want the value put before the kill", v)
		}
		return err
	})
}

// A member paused past a lease's TTL, its holder renewing all along,
// expires the lease once it runs again: its key is gone.
func TestProcessPausePastLeaseTTL(t *testing.T) {
	m := StartProcess(t, ProcessOptions{})
	cli := m.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	const ttl = 2 // seconds, etcd's least
	lease, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "session", "alive", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	renewals, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range renewals {
		}
	}()

	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(); err != nil {
		t.Fatalf("a second Pause: %v", err)
	}
	if st, err := procState(m.PID()); err != nil || st != 'T' {
		t.Fatalf("paused member's state %q, %v; want T (stopped)", st, err)
	}
	time.Sleep(ttl*time.Second + time.Second) // the pause must outlast the TTL
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	// The lessor marks the lease expired before the revocation that
	// deletes its keys is applied: wait for both.
	eventually(t, "the lease expires and its key goes", func(ctx context.Context) error {
		r, err := cli.TimeToLive(ctx, lease.ID)
		if err != nil {
			return err
		}
		if r.TTL != -1 {
			return errors.New("the lease is still granted")
		}
		g, err := cli.Get(ctx, "session")
		if err != nil {
			return err
		}
		if len(g.Kvs) != 0 {
			return fmt.Errorf("the key under the expired lease is still there: %v", g.Kvs)
		}
		return nil
	})
}

// Stop ends the member gracefully (exit 0); the lifecycle methods refuse
// what the state does not allow; the data outlives a Stop; a member that
// died by itself can be restarted.
func TestProcessStopRestartAndStates(t *testing.T) {
	m := StartProcess(t, ProcessOptions{})
	cli := m.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart of a running member: %v, want ErrRunning", err)
	}
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil { // a paused member too
		t.Fatalf("Stop: %v", err)
	}
	for name, f := range map[string]func() error{"Kill": m.Kill, "Stop": m.Stop, "Pause": m.Pause, "Resume": m.Resume} {
		if err := f(); !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s of a stopped member: %v, want ErrNotRunning", name, err)
		}
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "read after Stop and Restart", func(ctx context.Context) error {
		_, err := getValue(ctx, cli, "k")
		return err
	})

	// A member that dies by itself is down: Restart starts it again.
	syscall.Kill(m.PID(), syscall.SIGKILL)
	deadline := time.Now().Add(hang)
	for m.PID() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("PID() still names a member killed from outside")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Restart(); err != nil {
		t.Fatalf("Restart after the member died: %v", err)
	}
}

// A restart whose client port is taken waits for it, trying again, and
// serves on that same port once it is free.
func TestRestartWaitsForTakenPort(t *testing.T) {
	m := StartProcess(t, ProcessOptions{})
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", m.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	spawns := m.spawns.Load()
	done := make(chan error, 1)
	go func() { done <- m.Restart() }()
	deadline := time.Now().Add(hang)
	for m.spawns.Load() < spawns+2 { // one attempt failed, the next began
		if time.Now().After(deadline) {
			t.Fatal("Restart did not try again while the port was taken")
		}
		time.Sleep(10 * time.Millisecond)
	}
	taken.Close()
	if err := <-done; err != nil {
		t.Fatalf("Restart once the port was free: %v", err)
	}
	cli := m.Client(t)
	eventually(t, "a put after the restart", func(ctx context.Context) error {
		_, err := cli.Put(ctx, "k", "v")
		return err
	})
}

// A package whose TestMain does not call RunMemberIfChild gets an error
// that says so, not a hang.
func TestMissingHookIsReported(t *testing.T) {
	t.Setenv(noHookEnv, "1")
	p, err := newProcess(ProcessOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	err = p.startLocked()
	p.mu.Unlock()
	if err == nil {
		p.Kill()
		t.Fatal("a member started from a binary without the hook")
	}
	if !strings.Contains(err.Error(), "RunMemberIfChild") {
		t.Fatalf("the error does not name the hook: %v", err)
	}
}

// The member dies with the process that started it, even paused (so the
// kernel, not the member, must act): a test that fails or times out
// leaves no etcd behind.
func TestMemberDiesWithTestProcess(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"="+t.TempDir())
	parent.Stderr = os.Stderr
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
		for sc.Scan() {
		}
	}()
	var pid int
	select {
	case l := <-line:
		if pid, err = strconv.Atoi(strings.TrimPrefix(l, "member ")); err != nil {
			t.Fatalf("the parent printed %q", l)
		}
	case <-time.After(hang):
		t.Fatal("the parent printed nothing")
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // if this test fails
	if st, err := procState(pid); err != nil || st != 'T' {
		t.Fatalf("member %d: state %q, %v; want T (paused)", pid, st, err)
	}
	parent.Process.Kill()
	parent.Wait()
	deadline := time.Now().Add(hang)
	for {
		st, err := procState(pid)
		if err != nil || st == 'Z' || st == 'X' {
			return // gone, or dead and waiting for init to reap it
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %d still in state %q after its parent was killed", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A first start whose picked client port another process bound meanwhile
// picks new ports and serves there: no client knows the old ones yet.
func TestFirstStartPicksNewPortsWhenTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	old := freeAddr
	freeAddr = func() (string, error) {
		if picks++; picks == 1 {
			return taken.Addr().String(), nil
		}
		return old()
	}
	t.Cleanup(func() { freeAddr = old })
	m := StartProcess(t, ProcessOptions{})
	if m.ClientAddr() == taken.Addr().String() {
		t.Fatalf("the member serves at %s, the taken port", m.ClientAddr())
	}
	if picks < 4 {
		t.Fatalf("%d ports picked; want a second pair after the taken one", picks)
	}
	cli := m.Client(t)
	eventually(t, "a put", func(ctx context.Context) error {
		_, err := cli.Put(ctx, "k", "v")
		return err
	})
}
