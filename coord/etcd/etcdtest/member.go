package etcdtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/seed-992972ee/percolator/coord/etcd"
)

// memberEnv carries a child's memberSpec (JSON); a test binary started
// with it set runs an etcd member instead of its tests (RunMemberIfChild).
const memberEnv = "PERCOLATOR_ETCDTEST_MEMBER"

// readyLine is what a child prints on stdout once its member serves.
const readyLine = "etcdtest: member ready"

// A child's exit codes, besides 0 (stopped by SIGTERM).
const (
	exitFailed    = 1 // the member failed to start or died
	exitAddrInUse = 3 // a port was taken: the parent tries again
	exitOrphaned  = 4 // the parent is gone (stdin ended)
)

// memberSpec is what a child needs to run its member.
type memberSpec struct {
	Dir        string `json:"dir"`
	ClientAddr string `json:"client_addr"`
	PeerAddr   string `json:"peer_addr"`
	LogLevel   string `json:"log_level"`
}

// RunMemberIfChild makes this test binary an etcd member when StartProcess
// started it as one: it then serves until SIGTERM (and exits 0), SIGKILL
// or the death of the test that started it, and never returns. Otherwise
// it returns at once. Call it first thing in TestMain of every package
// whose tests call StartProcess:
//
//	func TestMain(m *testing.M) {
//		etcdtest.RunMemberIfChild()
//		os.Exit(m.Run())
//	}
func RunMemberIfChild() {
	spec := os.Getenv(memberEnv)
	if spec == "" {
		return
	}
	os.Exit(runMember(spec))
}

// runMember runs the member spec describes and returns the exit code.
func runMember(specJSON string) int {
	var spec memberSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest member: %s: %v\n", memberEnv, err)
		return exitFailed
	}
	// The parent holds our stdin open; it ends when the parent dies. This
	// backs up Pdeathsig where it is missing (not Linux).
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(exitOrphaned)
	}()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	m, err := etcd.StartEmbedded(context.Background(), etcd.EmbedOptions{
		Dir: spec.Dir, ClientAddr: spec.ClientAddr, PeerAddr: spec.PeerAddr, LogLevel: spec.LogLevel,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest member: %v\n", err)
		if errors.Is(err, syscall.EADDRINUSE) {
			return exitAddrInUse
		}
		return exitFailed
	}
	fmt.Println(readyLine)
	select {
	case <-term:
		m.Close()
		return 0
	case err := <-m.Err():
		fmt.Fprintf(os.Stderr, "etcdtest member: %v\n", err)
		return exitFailed
	}
}
