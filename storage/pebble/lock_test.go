package pebble

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-992972ee/percolator/storage"
)

// TestMain lets the test binary act as another process holding a store.
func TestMain(m *testing.M) {
	if dir := os.Getenv("PEBBLE_TEST_HOLD"); dir != "" {
		holdStore(dir)
		return
	}
	os.Exit(m.Run())
}

// holdStore opens dir, says "ready", and keeps it open until stdin closes.
func holdStore(dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Close()
}

// TestOpenHeldByAnotherProcess: the error names the holding process.
func TestOpenHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PEBBLE_TEST_HOLD="+dir)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("holder: %q", line)
	}
	_, err := Open(dir, Options{})
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !errors.Is(err, storage.ErrInUse) {
		t.Fatalf("Open of a store held by another process: %v", err)
	}
	if le.PID != cmd.Process.Pid || !strings.Contains(le.Command, "pebble.test") {
		t.Fatalf("holder named as pid %d %q, want pid %d running the test binary", le.PID, le.Command, cmd.Process.Pid)
	}
	t.Logf("%v", err)
}

// noLockFS refuses to create lock files, as a read-only directory does.
type noLockFS struct{ vfs.FS }

func (n noLockFS) Lock(name string) (io.Closer, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

// TestOpenPermissionError: a lock file that cannot be created is reported
// as what it is, not as a store in use.
func TestOpenPermissionError(t *testing.T) {
	_, err := Open("/db", Options{FS: noLockFS{vfs.NewMem()}})
	if err == nil || errors.Is(err, ErrLocked) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Open without permission on the lock file: %v, want a permission error (not ErrLocked)", err)
	}
}
