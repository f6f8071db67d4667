package main

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/cluster"
)

// TestDevclusterOracleCommand: devcluster prints an oracle command line
// with --bigtable, and that command, run as printed (with the printed
// environment), serves timestamps carrying the observer registry version.
func TestDevclusterOracleCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dc := command("devcluster", "--dir", t.TempDir())
	stdout, err := dc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var dcErr lockedBuffer
	dc.Stderr = &dcErr
	if err := dc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killProc(dc) })
	env, args := readDevcluster(t, stdout)
	if env == "" || !strings.Contains(strings.Join(args, " "), "--bigtable "+cluster.DevTable) {
		t.Fatalf("devcluster printed env %q, oracle %q; want BIGTABLE_EMULATOR_HOST and --bigtable %s\n%s", env, args, cluster.DevTable, dcErr.String())
	}
	addr := freeAddr(t)
	for i := range args {
		if args[i] == "--listen" && i+1 < len(args) {
			args[i+1] = addr // the printed port may be taken here
		}
	}
	orc := command(append([]string{"oracle"}, args...)...)
	orc.Env = append(orc.Env, env)
	var orcErr lockedBuffer
	orc.Stderr = &orcErr
	if err := orc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killProc(orc) })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := allocateReply(addr)
		if err == nil {
			if resp.ObserversVersion == nil {
				t.Fatalf("the printed oracle answers without a registry version\n%s", orcErr.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the printed oracle does not answer: %v\n%s", err, orcErr.String())
		}
	}
	_ = dc.Process.Signal(syscall.SIGTERM)
}

// readDevcluster reads devcluster's instructions up to "Stop with
// Ctrl-C." and returns the environment setting (NAME=value) and the
// arguments of the printed `percolator oracle` command.
func readDevcluster(t *testing.T, r io.Reader) (env string, oracleArgs []string) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "export "); ok {
			env = v
		}
		if rest, ok := strings.CutPrefix(line, "percolator oracle "); ok {
			oracleArgs = strings.Fields(strings.TrimSuffix(rest, "&"))
		}
		if line == "Stop with Ctrl-C." {
			break
		}
	}
	if _, _, err := net.SplitHostPort(strings.TrimPrefix(env, "BIGTABLE_EMULATOR_HOST=")); err != nil {
		t.Fatalf("devcluster's environment %q: %v", env, err)
	}
	return env, oracleArgs
}

// TestDevclusterSignalExitCodes: devcluster stops on SIGINT and SIGTERM
// with main's documented statuses, 130 and 143 (it is not one of the
// commands that drain and exit 0).
func TestDevclusterSignalExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		dc := command("devcluster", "--dir", t.TempDir())
		stdout, err := dc.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var dcErr lockedBuffer
		dc.Stderr = &dcErr
		if err := dc.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { killProc(dc) })
		readDevcluster(t, stdout)
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		_ = dc.Process.Signal(sig)
		code := waitExit(t, dc, 30*time.Second)
		if want := 128 + int(sig); code != want {
			t.Errorf("devcluster after %v: exit %d, want %d\n%s", sig, code, want, dcErr.String())
		}
	}
}

// waitExit waits for cmd to exit and returns its status; within only
// detects a hang.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within %v", cmd.Args[1:], within)
		return -1
	}
}
