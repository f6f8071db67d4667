package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestLockCLIProcesses: four processes at a time run `lock acquire res
// -- COMMAND` against one server; each command appends "start TOKEN" and
// "end TOKEN" to a shared file: the lines alternate start/end of one
// token, and tokens strictly increase — no two commands ran at once.
// Then show, a printed lease released by another process, and bad input.
func TestLockCLIProcesses(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	addr := freeAddr(t)
	serveProc(t, t.TempDir(), addr)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo start $PERCOLATOR_LOCK_TOKEN >> ` + log + `; sleep 0.02; echo end $PERCOLATOR_LOCK_TOKEN >> ` + log
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				cmd := command("lock", "acquire", "res", "--server", addr, "--ttl", "5s", "--", "sh", "-c", script)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("process %d: %v\n%s", p, err, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 32 {
		t.Fatalf("%d lines, want 32:\n%s", len(lines), b)
	}
	last := 0
	for i := 0; i < len(lines); i += 2 {
		var s, e int
		if _, err := fmt.Sscanf(lines[i]+" "+lines[i+1], "start %d end %d", &s, &e); err != nil || s != e || s <= last {
			t.Fatalf("lines %d-%d: %q %q (after token %d): commands overlapped or tokens did not increase\n%s", i, i+1, lines[i], lines[i+1], last, b)
		}
		last = s
	}
	out, _ := mustRun(t, 0, "lock", "show", "res", "--server", addr)
	if !strings.Contains(out, "free (last token "+strconv.Itoa(last)+")") {
		t.Fatalf("show: %s", out)
	}
	out, _ = mustRun(t, 0, "lock", "acquire", "held", "--server", addr, "--ttl", "1m")
	var token, id uint64
	if _, err := fmt.Sscanf(out, "acquired held token %d id %d", &token, &id); err != nil {
		t.Fatalf("acquire's output %q: %v", out, err)
	}
	if out, _ := mustRun(t, 0, "lock", "show", "held", "--server", addr); !strings.Contains(out, "held by") {
		t.Fatalf("show of a held lock: %s", out)
	}
	mustRun(t, 1, "lock", "acquire", "held", "--server", addr, "--wait", "100ms")
	mustRun(t, 0, "lock", "release", "held", "--server", addr, "--token", fmt.Sprint(token), "--id", fmt.Sprint(id))
	mustRun(t, 1, "lock", "release", "held", "--server", addr, "--token", fmt.Sprint(token), "--id", fmt.Sprint(id))
	mustRun(t, 0, "lock", "acquire", "held", "--server", addr, "--wait", "5s")
	for _, args := range [][]string{
		{"lock"},
		{"lock", "grab", "x", "--server", addr},
		{"lock", "acquire", "--server", addr},
		{"lock", "acquire", "x", "--server", addr, "--ttl", "0s"},
		{"lock", "release", "x", "--server", addr},
		{"lock", "show", "x", "--server", addr, "--", "true"},
	} {
		if _, errOut, code := runCLI(t, args...); code != 2 {
			t.Errorf("percolator %q: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
}
