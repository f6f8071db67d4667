package verify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-992972ee/percolator/internal/loopback"
)

// proc is one process verify started: a client, a server, an oracle. The
// nemesis kills and restarts it.
type proc struct {
	role string // "client", "server", "oracle", "devcluster"
	name string // role and number, for logs and the report
	bin  string
	// args returns the command line of the next start (a client's history
	// file and process ids change with each start).
	args func(start int) []string
	env  []string
	logs string // directory for stderr files
	addr string // an address that accepts once the process is up ("" for clients)
	// crashable: a server whose store is in its memory, whose power the
	// nemesis cuts (SIGUSR1) and which it never kills.
	crashable bool

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		done   chan struct{}
		starts int
	}
}

// start starts the process and, if it has an address, waits until it
// accepts connections.
func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	n := p.mu.starts
	p.mu.starts++
	cmd := exec.Command(p.bin, p.args(n)...)
	cmd.Env = append(os.Environ(), p.env...)
	logf, err := os.OpenFile(filepath.Join(p.logs, fmt.Sprintf("%s.%d.log", p.name, n)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd.Stderr = logf
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		_ = logf.Close()
		return fmt.Errorf("verify: starting %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.mu.cmd, p.mu.done = cmd, done
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	if p.addr == "" {
		return nil
	}
	if err := waitAccepts(ctx, p.addr, done, p.name); err != nil {
		return fmt.Errorf("%w; the end of its log (%s):\n%s", err, logf.Name(), logTail(logf.Name(), 10))
	}
	return nil
}

// logTail is the last n lines of the log file at path, or why it could
// not be read.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// waitAccepts waits until addr accepts a connection, the process exits
// (done) or ctx ends.
func waitAccepts(ctx context.Context, addr string, done <-chan struct{}, name string) error {
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("verify: %s exited before accepting on %s", name, addr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("verify: %s did not accept on %s within a minute", name, addr)
		}
	}
}

// logPath is the log file of the process's last start.
func (p *proc) logPath() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return filepath.Join(p.logs, fmt.Sprintf("%s.%d.log", p.name, p.mu.starts-1))
}

// running reports whether the process is running.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.done == nil {
		return false
	}
	select {
	case <-p.mu.done:
		return false
	default:
		return true
	}
}

// signal sends sig and, for a signal that ends the process (all but
// SIGSTOP, SIGCONT and SIGUSR1, the crashable server's power cut), waits
// until it has exited, SIGKILLing it after grace.
func (p *proc) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.mu.cmd, p.mu.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if sig == syscall.SIGSTOP || sig == syscall.SIGCONT || sig == syscall.SIGUSR1 {
		return // not an end: nothing to wait for
	}
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() { p.signal(syscall.SIGKILL, time.Minute) }

// stop ends the process with SIGTERM, SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGCONT, 0)
	p.signal(syscall.SIGTERM, grace)
}

// exitErr is the process's last exit, for reports.
func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cmd == nil || p.mu.cmd.ProcessState == nil {
		return nil
	}
	if p.mu.cmd.ProcessState.Success() {
		return nil
	}
	return errors.New(p.mu.cmd.ProcessState.String())
}

// freeAddr is a loopback address free a moment ago, below the kernel's
// ephemeral ports where it can (loopback.FreeAddr), so that neither a
// port-0 bind nor an outgoing connection of the busy machine's other
// processes takes it before the process verify starts on it binds it.
func freeAddr() (string, error) { return loopback.FreeAddr() }

// lastLines is the tail of a log file, for an error message.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
