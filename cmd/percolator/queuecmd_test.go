package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/queue"
)

// TestQueueCLIKill: items pushed from stdin go through 8 `queue consume`
// processes on one server while a killer SIGKILLs them at random (and
// starts new ones): every item is printed at least once, an item printed
// twice needs a kill for each repeat (a consumer killed between printing
// and acking), and at the end the queue is empty. Then stats, dead
// letters listed and requeued, and bad input.
func TestQueueCLIKill(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	addr := freeAddr(t)
	serveProc(t, t.TempDir(), addr)
	const items = 1000
	var in strings.Builder
	for i := range items {
		fmt.Fprintf(&in, "item-%05d\n", i)
	}
	push := command("queue", "push", "jobs", "--server", addr)
	push.Stdin = strings.NewReader(in.String())
	if out, err := push.CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf("pushed %d", items)) {
		t.Fatalf("push: %v\n%s", err, out)
	}
	var (
		mu      sync.Mutex
		outputs []*bytes.Buffer
		procs   = map[*exec.Cmd]bool{}
		kills   int
		wg      sync.WaitGroup
	)
	start := func() {
		var out bytes.Buffer
		cmd := command("queue", "consume", "jobs", "--server", addr, "--ttl", "2s", "--idle-exit", "4s")
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		outputs, procs[cmd] = append(outputs, &out), true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			mu.Lock()
			delete(procs, cmd)
			mu.Unlock()
			if err != nil && !strings.Contains(err.Error(), "killed") {
				t.Errorf("consume: %v", err)
			}
		}()
	}
	for range 8 {
		start()
	}
	killUntil := time.Now().Add(6 * time.Second)
	for time.Now().Before(killUntil) {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		mu.Lock()
		var live []*exec.Cmd
		for c := range procs {
			live = append(live, c)
		}
		mu.Unlock()
		if len(live) == 0 {
			break
		}
		_ = live[rng.IntN(len(live))].Process.Signal(syscall.SIGKILL)
		kills++
		start() // another takes its place
	}
	wg.Wait()
	seen := map[string]int{}
	mu.Lock()
	for _, o := range outputs {
		for _, line := range strings.Split(o.String(), "\n") {
			if line != "" {
				seen[line]++
			}
		}
	}
	mu.Unlock()
	repeats := 0
	for i := range items {
		n := seen[fmt.Sprintf("item-%05d", i)]
		if n == 0 {
			t.Errorf("item-%05d never printed", i)
		}
		repeats += max(0, n-1)
	}
	if repeats > kills {
		t.Errorf("%d items printed again after %d kills: a repeat without a kill", repeats, kills)
	}
	if kills < 3 {
		t.Errorf("only %d kills", kills)
	}
	t.Logf("%d items, %d kills, %d printed again", items, kills, repeats)
	out, _ := mustRun(t, 0, "queue", "stats", "jobs", "--server", addr)
	if !strings.HasPrefix(out, "depth 0\nin-flight 0\n") || !strings.Contains(out, "dead 0") {
		t.Fatalf("stats at the end:\n%s", out)
	}

	// A dead letter: delivered once (MaxDeliveries 1) and let expire.
	ctx := context.Background()
	db, err := percolator.Open(ctx, percolator.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := queue.New(db.Store(), queue.Options{MaxDeliveries: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "queue", "push", "poison", "bad item", "--server", addr)
	if d, err := q.Pop(ctx, "poison", time.Millisecond); err != nil || string(d.Body) != "bad item" {
		t.Fatalf("pop: %+v %v", d, err)
	}
	// Once its lease has expired by the store's clock (judged never
	// early: a busy machine's slow clock reading widens the margin), a
	// pop dead-letters it instead of delivering it again.
	for deadline := time.Now().Add(time.Minute); ; { // only a hang reaches it
		if d, err := q.TryPop(ctx, "poison", time.Minute); err != nil || d != nil {
			t.Fatalf("delivered past MaxDeliveries: %+v %v", d, err)
		}
		dead, err := q.Dead(ctx, "poison", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not dead-lettered after a minute: %+v", dead)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out, _ = mustRun(t, 0, "queue", "stats", "poison", "--server", addr)
	if !strings.Contains(out, "depth 0\n") || !strings.Contains(out, "dead 1\n") {
		t.Fatalf("stats with a dead letter:\n%s", out)
	}
	out, _ = mustRun(t, 0, "queue", "dead", "poison", "--server", addr)
	if !strings.HasSuffix(out, "\t1\tbad item\n") {
		t.Fatalf("dead:\n%s", out)
	}
	mustRun(t, 0, "queue", "dead", "poison", "--requeue", "--server", addr)
	out, _ = mustRun(t, 0, "queue", "consume", "poison", "--count", "1", "--server", addr)
	if out != "bad item\n" {
		t.Fatalf("consume after requeue: %q", out)
	}
	for _, args := range [][]string{
		{"queue"},
		{"queue", "peek", "x", "--server", addr},
		{"queue", "stats", "--server", addr},
		{"queue", "stats", "a", "b", "--server", addr},
		{"queue", "consume", "x", "--ttl", "0s", "--server", addr},
		{"queue", "consume", "x", "--count", "-1", "--server", addr},
		{"queue", "push", "", "item", "--server", addr},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("percolator %q: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}

// queueAndLockCLI runs the queue and lock commands on one deployment
// (target: its flags).
func queueAndLockCLI(t *testing.T, target ...string) {
	t.Helper()
	with := func(args ...string) []string { return append(args, target...) }
	mustRun(t, 0, with("queue", "push", "q", "one", "two", "three")...)
	out, _ := mustRun(t, 0, with("queue", "stats", "q")...)
	if !strings.HasPrefix(out, "depth 3\nin-flight 0\n") {
		t.Fatalf("stats: %q", out)
	}
	out, _ = mustRun(t, 0, with("queue", "consume", "q", "--count", "2")...)
	if out != "one\ntwo\n" {
		t.Fatalf("consume --count 2: %q", out)
	}
	out, _ = mustRun(t, 0, with("queue", "consume", "q", "--idle-exit", "300ms")...)
	if out != "three\n" {
		t.Fatalf("consume --idle-exit: %q", out)
	}
	mustRun(t, 0, with("queue", "dead", "q")...)
	out, _ = mustRun(t, 0, with("lock", "acquire", "res", "--ttl", "1m")...)
	var token, id uint64
	if _, err := fmt.Sscanf(out, "acquired res token %d id %d", &token, &id); err != nil {
		t.Fatalf("acquire: %q", out)
	}
	if out, _ := mustRun(t, 0, with("lock", "show", "res")...); !strings.Contains(out, "held by") {
		t.Fatalf("show: %q", out)
	}
	mustRun(t, 0, with("lock", "release", "res", "--token", fmt.Sprint(token), "--id", fmt.Sprint(id))...)
	out, _ = mustRun(t, 0, append(with("lock", "acquire", "res", "--ttl", "1m"), "--", "sh", "-c", "echo $PERCOLATOR_LOCK_TOKEN")...)
	if strings.TrimSpace(out) != fmt.Sprint(token+1) {
		t.Fatalf("acquire -- COMMAND: %q, want token %d", out, token+1)
	}
}

// TestQueueLockCLIDir: the queue and lock commands on a directory.
func TestQueueLockCLIDir(t *testing.T) {
	queueAndLockCLI(t, "--dir", t.TempDir())
}

// TestQueueLockCLIBigtable: the queue and lock commands on Bigtable (the
// emulator) and etcd, with an elected oracle process.
func TestQueueLockCLIBigtable(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess")
	}
	queueAndLockCLI(t, bigtableTarget(t, "test/test/queue")...)
}
