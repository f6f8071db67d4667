//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestLockKillFencing: four workers at a time run `lock acquire res --ttl
// 1s -- bash -c SCRIPT` against one server while a killer SIGKILLs
// acquire processes at random times (for 12s, then 4s without kills;
// again for 6s and 4s, up to three times more, while too little happened
// to tell: a busy machine runs fewer holders), holders (0–0.6s after
// they first act) and now and then waiters. SCRIPT acts on a protected resource (a
// fence: a TCP service in this test) sixteen times, with its token and
// its own holder id, and goes on acting after its acquire process was
// killed (an orphan past its lease: the stale actor fencing exists for).
// The fence refuses a token below the highest it accepted. Checked: no
// token is used by two holders, a holder's token is above every token in
// use before its process started, only holders that were killed or lost
// their lease are refused, and the fence's accepted actions never go back
// to a lower token; and, so that this is not vacuous, that holders were
// killed mid-lease, stale actions were refused, and the lock was granted
// again after every such kill.
func TestLockKillFencing(t *testing.T) {
	t.Parallel() // it waits on processes of its own most of the time: another test may run meanwhile
	if testing.Short() {
		t.Skip("subprocesses")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash (its /dev/tcp is the holders' client)")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (the processes' timing is not replayed)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	addr := freeAddr(t)
	serveProc(t, t.TempDir(), addr)
	f := startFence(t)
	pt := &procTable{}
	t.Cleanup(pt.killOrphans) // before the fence closes (cleanups run last first)
	script := fenceScript(f.addr(), 16, "0.1")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() { pt.work(t, f, w, bash, script, addr) })
	}
	for round, kills := 0, 12*time.Second; ; round, kills = round+1, 6*time.Second {
		pt.killer(rng, f, time.Now().Add(kills))
		time.Sleep(4 * time.Second) // the lock granted again after the last kills
		summary, enough := pt.eventful(f.history())
		if enough || round == 3 {
			break
		}
		t.Logf("after round %d, too little to tell (%s): again", round+1, summary)
	}
	pt.stop()
	wg.Wait()
	actions := f.history()
	checkFencing(t, actions, pt.all)
	checkNotVacuous(t, actions, pt.all)
}

// fenceScript is the holders' command: n times, act on the fence at addr
// with the lease's token and FENCE_HOLDER, then sleep. It ignores the
// fence's answer: a stale holder that keeps trying is the case to catch.
func fenceScript(addr string, n int, sleep string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(`for i in $(seq %d); do
  exec 3<>/dev/tcp/%s/%s || exit 3
  echo "$PERCOLATOR_LOCK_TOKEN $FENCE_HOLDER" >&3
  read -r answer <&3
  exec 3<&-
  sleep %s
done`, n, host, port, sleep)
}

// fence is the protected resource: a TCP service on the loopback that
// takes one line "TOKEN HOLDER" per connection, accepts it if TOKEN is at
// least the highest token it accepted (answer "ok") and refuses it
// otherwise ("stale"). It records every call in arrival order.
type fence struct {
	ln net.Listener
	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		max     uint64 // highest token accepted
		seen    uint64 // highest token in any call
		actions []action
		acted   map[string]bool // holders that called
	}
}

type action struct {
	token    uint64
	holder   string
	accepted bool
}

func startFence(t *testing.T) *fence {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fence{ln: ln}
	f.mu.acted = map[string]bool{}
	f.wg.Go(f.serve)
	t.Cleanup(func() { _ = ln.Close(); f.wg.Wait() })
	return f
}

func (f *fence) addr() string { return f.ln.Addr().String() }

func (f *fence) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.handle(c) })
	}
}

func (f *fence) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	var a action
	if _, err := fmt.Sscanf(line, "%d %s", &a.token, &a.holder); err != nil {
		fmt.Fprintf(c, "bad request %q\n", line)
		return
	}
	if f.act(a) {
		fmt.Fprintln(c, "ok")
	} else {
		fmt.Fprintln(c, "stale")
	}
}

// act is the fence's rule: a token below the highest accepted is stale.
func (f *fence) act(a action) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	a.accepted = a.token >= f.mu.max
	if a.accepted {
		f.mu.max = a.token
	}
	f.mu.seen = max(f.mu.seen, a.token)
	f.mu.acted[a.holder] = true
	f.mu.actions = append(f.mu.actions, a)
	return a.accepted
}

// now is the fence's position in its history and the highest token it
// has seen.
func (f *fence) now() (int, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mu.actions), f.mu.seen
}

func (f *fence) hasActed(holder string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.acted[holder]
}

func (f *fence) history() []action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]action(nil), f.mu.actions...)
}

// holderProc is one `lock acquire` process and its command's holder id.
type holderProc struct {
	id       string
	cmd      *exec.Cmd
	killable bool   // the killer may pick it (all but two)
	seenMax  uint64 // the highest token the fence had seen when it started
	killPos  int    // the fence's history length when the killer killed it; -1: not
	killed   bool   // it died of the killer's SIGKILL
	orphans  bool   // its group may hold a command that outlived it
	lost     bool   // it stopped its command: a renewal came too late
	ended    bool   // it exited 0: its command ran to its end
}

// procTable is the live acquire processes. After stop, none starts.
type procTable struct {
	mu      sync.Mutex
	live    map[*holderProc]bool
	all     []*holderProc
	stopped bool
}

// work runs acquire processes one after the other until stop.
func (pt *procTable) work(t *testing.T, f *fence, w int, bash, script, addr string) {
	for n := 0; ; n++ {
		p := &holderProc{id: fmt.Sprintf("w%d-%d", w, n), killable: n != 1 || w > 1, killPos: -1}
		p.cmd = command("lock", "acquire", "res", "--server", addr, "--ttl", "1s", "--", bash, "-c", script)
		p.cmd.Env = append(p.cmd.Env, "FENCE_HOLDER="+p.id)
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its command too: killOrphans
		var stderr bytes.Buffer
		p.cmd.Stderr = &stderr
		p.cmd.WaitDelay = 100 * time.Millisecond // an orphan keeps the pipe
		if !pt.start(t, f, p) {
			return
		}
		err := p.cmd.Wait()
		if !pt.finish(p, err, stderr.String()) {
			t.Errorf("%s: %v\n%s", p.id, err, stderr.String())
		}
	}
}

func (pt *procTable) start(t *testing.T, f *fence, p *holderProc) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.stopped {
		return false
	}
	_, p.seenMax = f.now()
	if err := p.cmd.Start(); err != nil {
		t.Error(err)
		return false
	}
	if pt.live == nil {
		pt.live = map[*holderProc]bool{}
	}
	pt.live[p], pt.all = true, append(pt.all, p)
	return true
}

// finish records how p ended and reports whether that was expected: the
// command ran to its end, the killer or the test's end killed it, or its
// lease was lost (a renewal late on a loaded machine; its command was
// stopped).
func (pt *procTable) finish(p *holderProc, err error, stderr string) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	delete(pt.live, p)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			p.orphans, p.killed = true, p.killPos >= 0
			return p.killed || pt.stopped
		}
		p.lost = ee.ExitCode() == 1 && strings.Contains(stderr, "lease lost")
		return p.lost
	}
	p.ended = err == nil || errors.Is(err, exec.ErrWaitDelay)
	return p.ended
}

// killer SIGKILLs random live killable processes at random times until
// until: a holder (one whose command has acted) 0–0.6s after it was first
// seen holding, and a waiter now and then (every 2s on average).
func (pt *procTable) killer(rng *rand.Rand, f *fence, until time.Time) {
	killAt := map[*holderProc]time.Time{}
	for time.Now().Before(until) {
		time.Sleep(50 * time.Millisecond)
		pt.killSome(rng, f, killAt)
	}
}

func (pt *procTable) killSome(rng *rand.Rand, f *fence, killAt map[*holderProc]time.Time) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var waiting []*holderProc
	for p := range pt.live {
		switch {
		case !p.killable || p.killPos >= 0:
		case !f.hasActed(p.id):
			waiting = append(waiting, p)
		case killAt[p].IsZero():
			killAt[p] = time.Now().Add(time.Duration(rng.IntN(600)) * time.Millisecond)
		case time.Now().After(killAt[p]):
			pt.killLocked(f, p)
		}
	}
	if len(waiting) > 0 && rng.IntN(40) == 0 {
		pt.killLocked(f, waiting[rng.IntN(len(waiting))])
	}
}

func (pt *procTable) killLocked(f *fence, p *holderProc) {
	p.killPos, _ = f.now()
	_ = p.cmd.Process.Kill()
}

// stop kills every live process and lets none start.
func (pt *procTable) stop() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.stopped = true
	for p := range pt.live {
		_ = p.cmd.Process.Kill()
	}
}

// killOrphans kills the process groups of the killed acquire processes:
// their commands, which outlived them.
func (pt *procTable) killOrphans() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for _, p := range pt.all {
		if p.orphans {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

// checkFencing checks mutual exclusion as the fence sees it: what the
// lock must give (one holder per token, tokens granted in increasing
// order, a holder refused only once its lease is over) and what the fence
// exists for (accepted actions never go back to a lower token, nor to
// another holder with the same one).
func checkFencing(t *testing.T, actions []action, procs []*holderProc) {
	t.Helper()
	tokenOf := checkOneHolderPerToken(t, actions)
	for _, p := range procs {
		if tok, ok := tokenOf[p.id]; ok && tok <= p.seenMax {
			t.Errorf("%s got token %d, though token %d was in use before its process started: tokens did not increase", p.id, tok, p.seenMax)
		}
	}
	checkRefusedWereStale(t, actions, procs)
	checkAcceptedInOrder(t, actions)
}

// checkOneHolderPerToken returns each holder's token.
func checkOneHolderPerToken(t *testing.T, actions []action) map[string]uint64 {
	t.Helper()
	holders, tokenOf := map[uint64]map[string]bool{}, map[string]uint64{}
	for _, a := range actions {
		if holders[a.token] == nil {
			holders[a.token] = map[string]bool{}
		}
		holders[a.token][a.holder], tokenOf[a.holder] = true, a.token
	}
	for _, tok := range slices.Sorted(maps.Keys(holders)) {
		if hs := holders[tok]; len(hs) > 1 {
			t.Errorf("token %d used by %d holders %v: granted more than once", tok, len(hs), slices.Sorted(maps.Keys(hs)))
		}
	}
	return tokenOf
}

// checkRefusedWereStale: the fence refused only holders whose lease may
// have been over: their process was killed, or it reported the lease
// lost. A refused holder that did neither shared the lock with a newer
// one while its lease lasted.
func checkRefusedWereStale(t *testing.T, actions []action, procs []*holderProc) {
	t.Helper()
	refused := map[string]int{}
	for _, a := range actions {
		if !a.accepted {
			refused[a.holder]++
		}
	}
	for _, p := range procs {
		if n := refused[p.id]; n > 0 && !p.orphans && !p.lost {
			t.Errorf("%s: %d actions refused, though its lease was never lost: a newer holder was granted the lock while it held it", p.id, n)
		}
	}
}

// checkAcceptedInOrder: the fence's own rule, checked on its history.
func checkAcceptedInOrder(t *testing.T, actions []action) {
	t.Helper()
	var last action
	var bad []string
	for i, a := range actions {
		if !a.accepted {
			continue
		}
		if a.token < last.token || a.token == last.token && a.holder != last.holder {
			bad = append(bad, fmt.Sprintf("action %d: the fence accepted token %d of %s after token %d of %s", i, a.token, a.holder, last.token, last.holder))
		}
		last = a
	}
	if len(bad) > 0 {
		t.Errorf("%d actions accepted out of token order, e.g.\n%s", len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
}

// eventful summarises what the processes so far did (as checkNotVacuous
// counts it) and reports whether that is enough to tell.
func (pt *procTable) eventful(actions []action) (string, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	c := countEvents(actions, pt.all)
	return c.String(), c.enough()
}

// events counts what a run tested.
type events struct {
	procs, killed, midLease, ended, lost, tokens, actions, refused int
	notGranted                                                     []string // holders killed mid-lease after whom the lock was never granted again
}

func (c events) String() string {
	return fmt.Sprintf("%d acquire processes: %d killed (%d mid-lease), %d ran their command to its end, %d lost their lease; %d tokens, %d actions, %d refused as stale",
		c.procs, c.killed, c.midLease, c.ended, c.lost, c.tokens, c.actions, c.refused)
}

// enough: holders were killed mid-lease, a stale action was refused,
// the lock was granted five times, a command ran to its end.
func (c events) enough() bool {
	return c.midLease >= 2 && c.refused > 0 && c.tokens >= 5 && c.ended > 0
}

// checkNotVacuous checks that the run tested something: holders were
// killed mid-lease (after their command acted), some stale action was
// refused, the lock was granted again after each such kill, and some
// holders ran their command to its end.
func checkNotVacuous(t *testing.T, actions []action, procs []*holderProc) {
	t.Helper()
	c := countEvents(actions, procs)
	for _, e := range c.notGranted {
		t.Error(e)
	}
	t.Log(c)
	if !c.enough() {
		t.Errorf("vacuous run: want at least 2 holders killed mid-lease, a stale action refused, 5 tokens and a command run to its end")
	}
}

// countEvents counts what actions and procs tested; the caller holds
// procs' table or is past its stop.
func countEvents(actions []action, procs []*holderProc) events {
	tokenOf, firstAct := map[string]uint64{}, map[string]int{}
	tokens, refused := map[uint64]bool{}, 0
	for i, a := range actions {
		if _, ok := firstAct[a.holder]; !ok {
			firstAct[a.holder] = i
		}
		tokenOf[a.holder] = a.token
		tokens[a.token] = true
		if !a.accepted {
			refused++
		}
	}
	c := events{procs: len(procs), tokens: len(tokens), actions: len(actions), refused: refused}
	for _, p := range procs {
		if p.killed {
			c.killed++
		}
		if p.lost {
			c.lost++
		}
		if p.ended {
			c.ended++
		}
		if i, ok := firstAct[p.id]; !p.killed || !ok || i >= p.killPos {
			continue
		}
		c.midLease++
		if !grantedAfter(actions, p.killPos, tokenOf[p.id]) {
			c.notGranted = append(c.notGranted, fmt.Sprintf("%s (token %d) was killed and the lock was never granted again", p.id, tokenOf[p.id]))
		}
	}
	return c
}

// grantedAfter reports whether the fence accepted a token above token at
// or after position pos of its history.
func grantedAfter(actions []action, pos int, token uint64) bool {
	for _, a := range actions[pos:] {
		if a.accepted && a.token > token {
			return true
		}
	}
	return false
}

// TestLockHolderStoppedAtLeaseEnd: the server pauses (SIGSTOP) under a
// holder of a 1s lease, so its renewal neither succeeds nor fails; its
// command (bash, which lets a SIGINT wait for the foreground command and
// then goes on) must be stopped by the lease's end by the holder's own
// clock, not when the renewal returns after the pause.
func TestLockHolderStoppedAtLeaseEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash")
	}
	addr := freeAddr(t)
	srv := serveProc(t, t.TempDir(), addr)
	log := filepath.Join(t.TempDir(), "log")
	holder, stderr := startHolder(t, addr, bash, `while :; do echo A >> `+log+`; sleep 0.05; done`)
	waitLines(t, log, 1)
	_ = srv.Process.Signal(syscall.SIGSTOP)
	time.Sleep(1600 * time.Millisecond) // the lease ends at most 0.99s after the pause
	n := len(readLines(t, log))
	time.Sleep(1400 * time.Millisecond)
	after := len(readLines(t, log)) - n
	_ = srv.Process.Signal(syscall.SIGCONT)
	err = holder.Wait()
	if after > 0 {
		t.Errorf("the command acted %d times 1.6–3s after the server paused, past its 1s lease", after)
	}
	if !strings.Contains(stderr.String(), "lease lost") {
		t.Errorf("acquire: %v, stderr %q; want the lease lost", err, stderr.String())
	}
}

// TestLockInterruptedHolderKeepsLease: SIGTERM to a holder passes the
// signal on to its command; bash finishes its loop regardless, and the
// holder must keep its lease until its command exits, so the next holder
// never acts while it still does.
func TestLockInterruptedHolderKeepsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocesses")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash")
	}
	addr := freeAddr(t)
	serveProc(t, t.TempDir(), addr)
	log := filepath.Join(t.TempDir(), "log")
	a, _ := startHolder(t, addr, bash, `for i in $(seq 40); do echo A >> `+log+`; sleep 0.05; done`)
	waitLines(t, log, 1)
	_ = a.Process.Signal(syscall.SIGTERM)
	b, bErr := startHolder(t, addr, bash, `echo B >> `+log)
	_ = a.Wait()
	if err := b.Wait(); err != nil {
		t.Fatalf("second holder: %v\n%s", err, bErr.String())
	}
	lines := readLines(t, log)
	if i := slices.Index(lines, "B"); i < 0 || slices.Contains(lines[i:], "A") {
		t.Fatalf("the interrupted holder's command acted after the next holder's (or that never ran): %q", lines)
	}
}

// startHolder starts `lock acquire res --ttl 1s -- bash -c script` in its
// own process group, killed at the test's end.
func startHolder(t *testing.T, addr, bash, script string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	c := command("lock", "acquire", "res", "--server", addr, "--ttl", "1s", "--", bash, "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	c.Stderr, c.WaitDelay = &stderr, 100*time.Millisecond
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL) })
	return c, &stderr
}

func waitLines(t *testing.T, path string, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(readLines(t, path)) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: fewer than %d lines after 20s", path, n)
		}
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}
