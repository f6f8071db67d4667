package oracle

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	killChildEnv       = "ORACLE_KILL9_CHILD_PATH"
	killChildWindowEnv = "ORACLE_KILL9_CHILD_WINDOW"
)

// runKillChild is the child side of TestAllocatorKill9: it allocates as
// fast as it can and prints "first last" for each range after Allocate
// returned it, until it is killed.
func runKillChild(path string) {
	window, _ := strconv.ParseUint(os.Getenv(killChildWindowEnv), 10, 64)
	a, err := OpenAllocator(path, AllocatorOptions{Window: window})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	out := os.Stdout // unbuffered: a line is written before the next call
	for i := 0; ; i++ {
		n := 1 + i%5
		first, err := a.Allocate(context.Background(), n)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "%d %d\n", first, first+uint64(n)-1)
	}
}

// TestAllocatorKill9 kills an allocating child process with SIGKILL at
// random moments, with small windows so kills land during mark
// extensions, and checks that the next timestamp, from the next child or
// from this process, exceeds every timestamp a child printed.
func TestAllocatorKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rng := testRand(t)
	path := filepath.Join(t.TempDir(), "oracle.mark")
	var maxSeen uint64
	for round := range 8 {
		window := 2 + rng.Uint64N(2000)
		delay := time.Duration(rng.Int64N(int64(40 * time.Millisecond)))
		lo, hi := killChild(t, path, window, delay)
		t.Logf("round %d: window %d, killed after %v, child printed %d..%d", round, window, delay, lo, hi)
		if lo <= maxSeen {
			t.Fatalf("round %d: child started at %d, not above %d", round, lo, maxSeen)
		}
		maxSeen = hi
		a, err := OpenAllocator(path, AllocatorOptions{})
		if err != nil {
			t.Fatal(err)
		}
		first, err := a.Allocate(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if first <= maxSeen {
			t.Fatalf("round %d: after kill -9 got %d, not above %d", round, first, maxSeen)
		}
		maxSeen = first
		a.Close()
	}
}

// killChild starts a child on path, kills it with SIGKILL delay after its
// first printed line, and returns the lowest and highest timestamps it
// printed.
func killChild(t *testing.T, path string, window uint64, delay time.Duration) (lo, hi uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path, fmt.Sprintf("%s=%d", killChildWindowEnv, window))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	result := make(chan [2]uint64, 1)
	go func() { result <- readRanges(stdout, first) }()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child printed nothing")
	}
	time.Sleep(delay) // picks the kill moment; asserts nothing
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r := <-result
	cmd.Wait()
	return r[0], r[1]
}

// readRanges reads "first last" lines until EOF, closing first after the
// first line, and returns the lowest first and the highest last. A final
// line cut short by the kill is ignored.
func readRanges(r io.Reader, first chan<- struct{}) [2]uint64 {
	br := bufio.NewReader(r)
	var lo, hi uint64
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if lo == 0 {
				close(first)
			}
			return [2]uint64{lo, hi}
		}
		var f, l uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d %d", &f, &l); err != nil {
			continue
		}
		if lo == 0 {
			lo = f
			close(first)
		}
		hi = max(hi, l)
	}
}
