package etcdtest

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Environment variables that re-run this test binary in another role.
const (
	// parentEnv names a data directory: the binary plays a test process
	// that starts a member there, pauses it, prints its pid and waits to
	// be killed (TestMemberDiesWithTestProcess).
	parentEnv = "PERCOLATOR_ETCDTEST_PARENT"
	// noHookEnv makes the binary a test binary whose TestMain forgot
	// RunMemberIfChild (TestMissingHookIsReported).
	noHookEnv = "PERCOLATOR_ETCDTEST_NO_HOOK"
)

// TestMain runs the member of a StartProcess child, or another role, or
// the tests; then it fails the package if a goroutine of a Process
// outlives the tests (every test's cleanup kills its member).
func TestMain(m *testing.M) {
	if os.Getenv(noHookEnv) == "" {
		RunMemberIfChild()
	}
	if dir := os.Getenv(parentEnv); dir != "" {
		os.Exit(runParent(dir))
	}
	code := m.Run()
	if code == 0 {
		if stack := processGoroutines(); stack != "" {
			os.Stderr.WriteString("goroutine leak: Process goroutines left after the tests:\n" + stack)
			code = 1
		}
	}
	os.Exit(code)
}

// runParent starts a member in dir, pauses it (so that only the kernel,
// not the member, can notice this process's death), prints "member PID"
// and waits to be killed.
func runParent(dir string) int {
	p, err := newProcess(ProcessOptions{Dir: dir})
	if err == nil {
		p.mu.Lock()
		err = p.startLocked()
		p.mu.Unlock()
	}
	if err == nil {
		err = p.Pause()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "parent:", err)
		return 1
	}
	fmt.Println("member", p.PID())
	time.Sleep(time.Hour)
	return 1
}

// processFrame matches a stack frame in the package's own code, not its
// tests.
var processFrame = regexp.MustCompile(`/coord/etcd/etcdtest/[a-z]+\.go:\d+`)

// processGoroutines returns the stacks of the goroutines running the
// package's code, waiting a little for those about to exit.
func processGoroutines() string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		leaked := packageGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// packageGoroutines returns the stacks of the goroutines running the
// package's code now.
func packageGoroutines() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if processFrame.MatchString(g) {
			found = append(found, g)
		}
	}
	return found
}
