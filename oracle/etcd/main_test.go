package etcd_test

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if a goroutine of a Candidate (its campaign,
// a renewal, its key's watch) outlives the tests: every test closes its
// candidates in a cleanup, or crashes them.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if stack := candidateGoroutines(); stack != "" {
			os.Stderr.WriteString("goroutine leak: Candidate goroutines left after the tests:\n" + stack)
			code = 1
		}
	}
	os.Exit(code)
}

// candidateGoroutines returns the stacks of the goroutines running
// Candidate code, waiting a little for those about to exit.
func candidateGoroutines() string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "oracle/etcd.(*Candidate)") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
