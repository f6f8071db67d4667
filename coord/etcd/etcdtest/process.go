package etcdtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seed-992972ee/percolator/internal/loopback"
)

var (
	// ErrRunning: Restart on a member that is running.
	ErrRunning = errors.New("etcdtest: the member is running")
	// ErrNotRunning: Kill, Stop, Pause or Resume on a member that is down.
	ErrNotRunning = errors.New("etcdtest: the member is not running")
)

// stopTimeout bounds how long Stop waits for a graceful exit before it
// kills the member.
const stopTimeout = 10 * time.Second

// retryPortEvery is how often a start retries while a port is taken.
const retryPortEvery = 50 * time.Millisecond

// ProcessOptions configures StartProcess. The zero value is usable.
type ProcessOptions struct {
	// Dir holds the member's data, kept across restarts. Default: a
	// temporary directory of the test.
	Dir string
	// LogLevel is the member's log level. Its log is kept (the last
	// 64 KiB) and shown if the test fails. Default "error".
	LogLevel string
	// StartTimeout bounds a start or restart, waiting for a taken port
	// included. Default 30s.
	StartTimeout time.Duration
}

// Process is a single-member etcd running in a child process (the test
// binary re-run; see RunMemberIfChild) that a test can kill, stop,
// restart, pause and resume. Its data directory and both ports stay the
// same across restarts, so a client reconnects to the same endpoint and
// finds what the member had made durable. The child dies with the test
// process, however it ends (Pdeathsig on Linux, and the end of its stdin).
//
// Methods are safe for concurrent use; Kill, Stop, Restart, Pause and
// Resume run one at a time (mu).
type Process struct {
	spec       string // the child's memberSpec, JSON
	clientAddr string
	timeout    time.Duration
	logs       *tail
	spawns     atomic.Int64 // children started, failed attempts included

	mu struct {
		sync.Mutex
		child *child // nil while the member is down
	}
}

// child is one run of the member.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File      // our end of its stdin; it ends when we die
	exited chan struct{} // closed once it has been reaped
	paused bool
}

// StartProcess starts a member in a child process and waits until it
// serves; the member is killed when the test ends. The package's TestMain
// must call RunMemberIfChild.
func StartProcess(t testing.TB, opts ProcessOptions) *Process {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	// Its first start picks its ports: one taken meanwhile by another
	// process (ports free a moment ago are free only until someone binds
	// them) makes it pick new ones, as no client knows the old ones yet.
	// A restart keeps its ports and waits for them (startLocked).
	for attempt := 1; ; attempt++ {
		p, err := newProcess(opts)
		if err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		c, err := p.spawnLocked(time.Now().Add(p.timeout))
		if err == nil {
			p.mu.child = c
		}
		p.mu.Unlock()
		if errors.Is(err, errAddrInUse) && attempt < firstStartPicks {
			continue
		}
		if err != nil {
			t.Logf("etcd member's log (last %d bytes):\n%s", tailSize, p.logs.String())
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Kill()
			if t.Failed() {
				t.Logf("etcd member's log (last %d bytes):\n%s", tailSize, p.logs.String())
			}
		})
		return p
	}
}

// firstStartPicks bounds the port pairs a member's first start tries.
const firstStartPicks = 5

// newProcess picks the ports of a member in opts.Dir; it does not start
// it.
func newProcess(opts ProcessOptions) (*Process, error) {
	if opts.LogLevel == "" {
		opts.LogLevel = "error"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	client, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(memberSpec{Dir: opts.Dir, ClientAddr: client, PeerAddr: peer, LogLevel: opts.LogLevel})
	if err != nil {
		return nil, err
	}
	return &Process{spec: string(spec), clientAddr: client, timeout: opts.StartTimeout, logs: &tail{}}, nil
}

// Endpoints returns the member's client URL, for clientv3.Config.
func (p *Process) Endpoints() []string { return []string{"http://" + p.clientAddr} }

// ClientAddr returns the member's client host:port (a faultproxy target).
func (p *Process) ClientAddr() string { return p.clientAddr }

// Client returns a client of the member, closed when the test ends.
func (p *Process) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return ClientAt(t, p.Endpoints()...)
}

// PID returns the member's process id, 0 while it is down.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.childLocked()
	if c == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// childLocked returns the running child, or nil if the member is down,
// killed or stopped, or died by itself.
func (p *Process) childLocked() *child {
	if c := p.mu.child; c != nil {
		select {
		case <-c.exited:
			p.mu.child = nil
		default:
		}
	}
	return p.mu.child
}

// Kill kills the member with SIGKILL, paused or not, and waits until it
// is gone: a crash. What it had acknowledged is on disk (etcd syncs its
// log before it answers).
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.childLocked()
	if c == nil {
		return ErrNotRunning
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
	p.mu.child = nil
	return nil
}

// Stop stops the member with SIGTERM (resuming it if paused) and waits
// until it has exited. If it has not within 10s it is killed, and Stop
// says so.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.childLocked()
	if c == nil {
		return ErrNotRunning
	}
	p.mu.child = nil
	c.cmd.Process.Signal(syscall.SIGTERM)
	if c.paused {
		c.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
		return fmt.Errorf("etcdtest: the member did not stop within %v of SIGTERM; killed it", stopTimeout)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("etcdtest: the member exited with code %d after SIGTERM", code)
	}
	return nil
}

// Restart starts the member again after Kill or Stop (or its own death),
// on the same data directory and ports, and waits until it serves. A port that is briefly
// still taken is waited for, within ProcessOptions.StartTimeout.
func (p *Process) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.childLocked() != nil {
		return ErrRunning
	}
	return p.startLocked()
}

// Pause stops the member with SIGSTOP and returns once it has stopped: it
// answers nothing, its TCP connections stay open, and its clock runs on,
// so leases expire under it. Pausing a paused member does nothing.
func (p *Process) Pause() error { return p.setPaused(true) }

// Resume continues a paused member with SIGCONT and returns once it runs.
func (p *Process) Resume() error { return p.setPaused(false) }

func (p *Process) setPaused(paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.childLocked()
	if c == nil {
		return ErrNotRunning
	}
	if c.paused == paused {
		return nil
	}
	sig := syscall.SIGCONT
	if paused {
		sig = syscall.SIGSTOP
	}
	if err := c.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdtest: signal the member: %w", err)
	}
	if err := waitStopped(c.cmd.Process.Pid, paused, c.exited); err != nil {
		return err
	}
	c.paused = paused
	return nil
}

// startLocked starts the member, trying again while a port is taken,
// until the start timeout.
func (p *Process) startLocked() error {
	deadline := time.Now().Add(p.timeout)
	for {
		c, err := p.spawnLocked(deadline)
		if err == nil {
			p.mu.child = c
			return nil
		}
		if !errors.Is(err, errAddrInUse) || time.Now().Add(retryPortEvery).After(deadline) {
			return err
		}
		time.Sleep(retryPortEvery)
	}
}

// errAddrInUse: the child found a port taken.
var errAddrInUse = errors.New("etcdtest: a port of the member is taken")

// spawnLocked runs one child and waits until its member serves, it exits
// or deadline passes (then it is killed).
func (p *Process) spawnLocked(deadline time.Time) (*child, error) {
	p.spawns.Add(1)
	c, stdout, err := startChild(p.spec, p.logs)
	if err != nil {
		return nil, err
	}
	ready := make(chan []string, 1)
	go readStatus(stdout, ready)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case other := <-ready:
		if other == nil {
			return c, nil
		}
		<-c.exited
		return nil, c.failure(other, p.logs)
	case <-timer.C:
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.exited
		return nil, fmt.Errorf("etcdtest: the member did not serve within %v; its log:\n%s", p.timeout, p.logs)
	}
}

// startChild starts the test binary as the member spec describes, its
// stderr going to logs, and returns it and the read end of its stdout.
func startChild(spec string, logs io.Writer) (*child, *os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("etcdtest: find the test binary: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnv+"="+spec)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stderr = logs
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	c := &child{cmd: cmd, stdin: inW, exited: make(chan struct{})}
	err = c.start()
	inR.Close() // the child's ends
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, fmt.Errorf("etcdtest: start the member: %w", err)
	}
	return c, outR, nil
}

// start starts the child from a goroutine that keeps its OS thread until
// the child has been reaped: Pdeathsig fires when the thread that started
// the child ends, and Go ends a thread only when a goroutine locked to it
// returns, which this one does after Wait.
func (c *child) start() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		c.cmd.Wait()
		c.stdin.Close()
		close(c.exited)
	}()
	return <-started
}

// failure explains why a child exited before serving; other is what it
// printed on stdout.
func (c *child) failure(other []string, logs *tail) error {
	switch code := c.cmd.ProcessState.ExitCode(); code {
	case exitAddrInUse:
		return errAddrInUse
	case 0:
		return fmt.Errorf("etcdtest: the test binary ran no member (it printed %q): call etcdtest.RunMemberIfChild() first thing in TestMain", other)
	default:
		return fmt.Errorf("etcdtest: the member exited with code %d before serving; its log:\n%s", code, logs)
	}
}

// readStatus reads the child's stdout until the ready line, then sends
// nil on ready, or at EOF the lines it read instead; it drains the rest
// until the child exits.
func readStatus(r *os.File, ready chan<- []string) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	other := []string{}
	for sc.Scan() {
		if sc.Text() == readyLine {
			ready <- nil
			io.Copy(io.Discard, r)
			return
		}
		other = append(other, sc.Text())
	}
	ready <- other
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago,
// below the kernel's range of ephemeral ports where it can (loopback.FreeAddr):
// a port in that range may become the source port of an outgoing
// connection while the member is down, and a restart would wait for it. A
// variable: a test hands out a taken port.
var freeAddr = loopback.FreeAddr

// tailSize is how much of a member's log a Process keeps.
const tailSize = 64 << 10

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
