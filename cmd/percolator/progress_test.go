package main

import (
	"bufio"
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/docindex"
)

// interruptDuring runs the command args with the phase labelled label
// held once started (PERCOLATOR_PROGRESS_HOLD), waits for the phase's
// first line on stderr, sends SIGINT, and checks that the command exits
// 130 and that the phase's last line says where it was interrupted,
// never that it was done.
func interruptDuring(t *testing.T, label string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := commandEnv([]string{"PERCOLATOR_PROGRESS_HOLD=" + label, "PERCOLATOR_PROGRESS_EVERY=20ms"}, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() }) // the test's deadline
	defer stop()
	var seen []string
	signalled := false
	for sc := bufio.NewScanner(stderr); sc.Scan(); {
		seen = append(seen, sc.Text())
		if !signalled && strings.HasPrefix(sc.Text(), label+": ") {
			signalled = true
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	out := strings.Join(seen, "\n")
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s: still running after %v; it wrote:\n%s", label, 2*time.Minute, out)
	case !signalled:
		t.Fatalf("%s: the phase never started; it wrote:\n%s", label, out)
	case cmd.ProcessState.ExitCode() != 130:
		t.Errorf("%s: exit %d after SIGINT, want 130; it wrote:\n%s", label, cmd.ProcessState.ExitCode(), out)
	case !strings.Contains(out, "\n"+label+": interrupted at "):
		t.Errorf("%s: no line says the phase was interrupted; it wrote:\n%s", label, out)
	case strings.Contains(out, label+": done") || strings.Contains(out, "100%"):
		t.Errorf("%s: the interrupted phase claims completion:\n%s", label, out)
	}
}

// TestIndexInterruptedPhases: SIGINT during each step of index's phases
// ends the command (130) with the step's line saying where it was
// interrupted.
func TestIndexInterruptedPhases(t *testing.T) {
	t.Parallel()
	for _, step := range []string{docindex.StepListing, docindex.StepComparing, docindex.StepLoading, docindex.StepObservers, docindex.StepCounting,
		docindex.StepExporting, docindex.StepRereading} {
		t.Run(strings.ReplaceAll(step, " ", "_"), func(t *testing.T) {
			t.Parallel()
			interruptDuring(t, step, "index", "--dir", filepath.Join(t.TempDir(), "db"), "--verify", corpus)
		})
	}
}

// TestGraphLoadInterrupted: SIGINT while graph load reads the file, and
// while it inserts the edges.
func TestGraphLoadInterrupted(t *testing.T) {
	t.Parallel()
	for _, label := range []string{"reading: bytes of debian-deps.tsv.gz", "loading: edges inserted"} {
		t.Run(strings.ReplaceAll(label, " ", "_"), func(t *testing.T) {
			t.Parallel()
			interruptDuring(t, label, "graph", "load", "--dir", filepath.Join(t.TempDir(), "db"), "--limit", "200")
		})
	}
}

// TestBenchInterrupted: SIGINT during the long phases of bench's figures:
// their setups, their observers' runs, a timed measurement.
func TestBenchInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ label, figure string }{
		{"queue: items pushed", "queue"},
		{"notify: cells loaded", "notify"},
		{"notify: observer runs", "notify"},
		{"writes: seconds measured", "writes"},
		{"lock: seconds measured", "lock"},
		{"rerun: index runs", "rerun"},
		{"observers: runs with 1 scanners", "observers"},
		{"gc: the bank on two stores, with and without the collector: seconds", "gc"},
	} {
		t.Run(strings.ReplaceAll(tc.label, " ", "_"), func(t *testing.T) {
			t.Parallel()
			interruptDuring(t, tc.label, "bench", "--only", tc.figure, "--dir", filepath.Join(t.TempDir(), "bench"),
				"--notify-cells", "2000", "--notify-dirty", "10", "--gc-versions", "2", "--gc-duration", "5s", "--gc-lifetime", "1s", "--index-files", "20")
		})
	}
}

// TestBackupRestoreInterrupted: SIGINT while backup writes the cells,
// and while restore checks the file and while it loads it.
func TestBackupRestoreInterrupted(t *testing.T) {
	t.Parallel()
	dir, file := filepath.Join(t.TempDir(), "db"), filepath.Join(t.TempDir(), "b.pcb")
	if _, errOut, code := runCLI(t, "index", "--dir", dir, "--quiet", corpus); code != 0 {
		t.Fatalf("index: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "backup", "--dir", dir, "--out", file, "--quiet"); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, errOut)
	}
	t.Run("backup", func(t *testing.T) {
		t.Parallel()
		interruptDuring(t, "backup: cells written", "backup", "--dir", dir, "--out", filepath.Join(t.TempDir(), "c.pcb"))
	})
	for _, label := range []string{"checking the file: bytes", "restoring: bytes loaded"} {
		t.Run(strings.ReplaceAll(label, " ", "_"), func(t *testing.T) {
			t.Parallel()
			interruptDuring(t, label, "restore", "--dir", filepath.Join(t.TempDir(), "db"), file)
		})
	}
}

// TestGCInterrupted: SIGINT while gc collects, its first batch of rows
// visited.
func TestGCInterrupted(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db")
	if _, errOut, code := runCLI(t, "index", "--dir", dir, "--quiet", corpus); code != 0 {
		t.Fatalf("index: exit %d: %s", code, errOut)
	}
	interruptDuring(t, "collecting: rows visited", "gc", "--dir", dir, "--gc-lifetime", "1ms")
}
