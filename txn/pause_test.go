//go:build unix

package txn_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/coord"
	coordremote "github.com/seed-992972ee/percolator/coord/remote"
	oracleremote "github.com/seed-992972ee/percolator/oracle/remote"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
	"github.com/seed-992972ee/percolator/txn"
)

// The test binary runs as the paused client of TestSessionPause when
// pauseChildEnv holds the server's address (pauseMutantEnv=1: with a
// store whose commit ignores its predicate).
const (
	pauseChildEnv  = "PERCOLATOR_TXN_PAUSE_CHILD"
	pauseMutantEnv = "PERCOLATOR_TXN_PAUSE_MUTANT"
	pauseLease     = time.Second
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(pauseChildEnv); addr != "" {
		os.Exit(pauseChild(addr, os.Getenv(pauseMutantEnv) == "1"))
	}
	os.Exit(m.Run())
}

// pauseChild is the client that the parent pauses. It holds a session
// with a short lease and writes "child" to p (the primary) and s. Its
// commit passes the session check; at CrashAfterSessionCheck it prints
// "session-checked" and waits for a line on stdin, which the parent sends
// after it has stopped the process (SIGSTOP: the session's renewals stop
// too), rolled the transaction back, and continued it (SIGCONT). Then the
// commit goes on to its commit point, and the child prints "result " and
// how it ended. (Waiting on stdin rather than sleeping makes sure the
// stop lands before the commit call.)
func pauseChild(addr string, mutant bool) int {
	ctx := context.Background()
	fail := func(what string, err error) int {
		fmt.Printf("setup-error %s: %v\n", what, err)
		return 1
	}
	conn, err := rpc.Dial(ctx, addr, rpc.DialOptions{})
	if err != nil {
		return fail("dial", err)
	}
	rs, err := remote.New(ctx, conn, remote.Options{})
	if err != nil {
		return fail("store", err)
	}
	sess, err := coordremote.Open(ctx, conn, coord.NewOwnerID(), pauseLease, quiet)
	if err != nil {
		return fail("session", err)
	}
	var st storage.Store = rs
	if mutant {
		st = &blindCommitStore{Store: rs}
	}
	// A long lock TTL: only the session's expiry can make the lock
	// resolvable.
	opts := txn.Options{Owner: sess.Owner(), Session: sess.Check, LockTTL: time.Hour, Logger: quiet}
	c, err := txn.NewClient(ctx, st, oracleremote.NewClient(conn), sess, opts)
	if err != nil {
		return fail("client", err)
	}
	stdin := bufio.NewReader(os.Stdin)
	txn.SetCrashHook(c, func(point string) bool {
		if point == txn.CrashAfterSessionCheck {
			fmt.Println("session-checked")
			_, _ = stdin.ReadString('\n')
		}
		return false
	})
	fmt.Println("owner", sess.Owner())
	fmt.Println("result", commitOutcome(writeBoth(ctx, c, "child")))
	return 0
}

// commitOutcome names how a commit ended: ok, conflict, session-lost,
// unknown or error, then the error.
func commitOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, txn.ErrSessionLost):
		return "session-lost: " + err.Error()
	case errors.Is(err, txn.ErrConflict):
		return "conflict: " + err.Error()
	case errors.Is(err, txn.ErrCommitUnknown):
		return "unknown: " + err.Error()
	}
	return "error: " + err.Error()
}

// blindCommitStore is the mutant: its protocol CheckAndMutate applies a
// commit (a commit record in ifTrue) without checking the predicate, as a
// store without a conditional write would. Nothing then stops a client
// that was judged dead from committing over the rollback.
type blindCommitStore struct{ *remote.Store }

func (s *blindCommitStore) CheckAndMutateIdempotent(ctx context.Context, row []byte, pred storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	for _, m := range ifTrue {
		if w, err := txn.DecodeWrite(m.Value); m.Kind == storage.Put && m.Family == txn.FamilyWrite && err == nil && w.Op != txn.OpRollback {
			return true, s.Mutate(ctx, row, ifTrue...)
		}
	}
	return s.Store.CheckAndMutateIdempotent(ctx, row, pred, ifTrue, ifFalse)
}

// CheckAndMutateInEpoch implements storage.Epoched: a server's client
// sends its commit point through it. The mutant applies the commit and
// the secondaries' commits without checking the lock.
func (s *blindCommitStore) CheckAndMutateInEpoch(ctx context.Context, epoch uint64, check storage.RowCheck, then []storage.RowMutation) (bool, error) {
	for _, m := range check.IfTrue {
		if w, err := txn.DecodeWrite(m.Value); m.Kind == storage.Put && m.Family == txn.FamilyWrite && err == nil && w.Op != txn.OpRollback {
			rows := append([]storage.RowMutation{{Row: check.Row, Mutations: check.IfTrue}}, then...)
			_, err := s.MutateRows(ctx, rows)
			return true, err
		}
	}
	return s.Store.CheckAndMutateInEpoch(ctx, epoch, check, then)
}

// CommitInEpoch implements storage.EpochStamper: the mutant takes no
// commit point whose timestamp the server stamps, so the client sends
// its commit point through CheckAndMutateInEpoch above.
func (s *blindCommitStore) CommitInEpoch(context.Context, uint64, storage.RowCheck, []storage.RowMutation, []storage.RowMutation, *uint64) (uint64, bool, error) {
	return 0, false, storage.ErrNoOnePhase
}

// TestSessionPause: a client passes its session check and is paused
// (SIGSTOP) before its commit call; its lease expires; another client finds
// its locks, judges it dead (the server's sessions) and rolls it back;
// then it continues. Its commit must fail (the primary's CheckAndMutate
// finds no lock), never report success, and nothing of it is visible.
func TestSessionPause(t *testing.T) {
	res := runPause(t, false)
	t.Logf("the paused client's commit: %s", res.result)
	if !strings.HasPrefix(res.result, "conflict") {
		t.Errorf("the paused client's commit: %q; want a conflict (rolled back while it was paused)", res.result)
	}
	for _, v := range res.violations {
		t.Error(v)
	}
}

// TestSessionPauseMutant: against a store whose commit ignores the
// primary's lock, the checks of TestSessionPause must fail.
func TestSessionPauseMutant(t *testing.T) {
	res := runPause(t, true)
	t.Logf("mutant: %s; violations: %q", res.result, res.violations)
	if len(res.violations) == 0 {
		t.Fatal("the pause check passed against a commit that ignores its lock: it cannot fail")
	}
}

type pauseResult struct {
	result     string   // the child's commit outcome
	violations []string // what of the rolled-back transaction shows
}

// runPause runs the paused child against an in-process server. p and s
// hold "v0" before; the child writes "child".
func runPause(t *testing.T, mutant bool) pauseResult {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	// No restart grace: an owner without a live session is dead at once.
	srv := servertest.Start(t, server.Options{RestartGrace: time.Nanosecond, Logger: quiet}, "")
	conn := servertest.Dial(t, srv.Addr, rpc.DialOptions{})
	rs := servertest.Store(t, conn, remote.Options{})
	orc := oracleremote.NewClient(conn)
	sess, err := coordremote.Open(ctx, conn, coord.NewOwnerID(), 0, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	c, err := txn.NewClient(ctx, rs, orc, sess, txn.Options{Owner: sess.Owner(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := writeBoth(ctx, c, "v0"); err != nil {
		t.Fatal(err)
	}

	ch := startChild(t, srv.Addr, mutant)
	owner := strings.TrimPrefix(ch.expect("owner "), "owner ")
	ch.expect("session-checked")
	ch.signal(syscall.SIGSTOP)
	if err := awaitDead(ctx, sess, owner); err != nil {
		t.Fatalf("the stopped child's session never expired: %v", err)
	}
	before := c.Stats().RolledBack
	if v := readBoth(ctx, t, c); v != "v0 v0" {
		t.Errorf("while the child is paused, p and s read %s; want v0 v0", v)
	}
	if c.Stats().RolledBack == before {
		t.Error("the reader rolled nothing back: it did not find the paused client's locks")
	}
	ch.signal(syscall.SIGCONT)
	ch.send("go\n")
	res := pauseResult{result: strings.TrimPrefix(ch.expect("result "), "result ")}
	ch.wait()

	if res.result == "ok" {
		res.violations = append(res.violations, "the paused client reported success after it was rolled back")
	}
	if v := readBoth(ctx, t, c); v != "v0 v0" {
		res.violations = append(res.violations, "after the child ended, p and s read "+v+"; want v0 v0")
	}
	for _, row := range []string{"p", "s"} {
		r, err := rs.ReadRow(ctx, []byte(row), storage.Filter{{Family: txn.FamilyLock, AllQualifiers: true}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Cells) > 0 {
			res.violations = append(res.violations, row+": a lock is left")
		}
	}
	return res
}

// awaitDead waits until the server reports owner dead.
func awaitDead(ctx context.Context, sess *coordremote.Session, owner string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*pauseLease)
	defer cancel()
	for {
		alive, err := sess.Alive(ctx, owner)
		if err == nil && !alive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("owner %s still alive (%v)", owner, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readBoth reads p and s in one snapshot, as "p s" (an error in place of
// a value).
func readBoth(ctx context.Context, t testing.TB, c *txn.Client) string {
	t.Helper()
	tx, err := c.BeginReadOnly(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	var out []string
	for _, row := range []string{"p", "s"} {
		v, err := tx.Get(ctx, row, "c")
		if err != nil {
			out = append(out, "("+err.Error()+")")
			continue
		}
		out = append(out, string(v))
	}
	return strings.Join(out, " ")
}

// child is the test binary re-run as pauseChild.
type child struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
}

func startChild(t testing.TB, addr string, mutant bool) *child {
	t.Helper()
	ch := &child{t: t, lines: make(chan string, 16)}
	ch.cmd = exec.Command(os.Args[0], "-test.run=^$")
	ch.cmd.Env = append(os.Environ(), pauseChildEnv+"="+addr)
	if mutant {
		ch.cmd.Env = append(ch.cmd.Env, pauseMutantEnv+"=1")
	}
	ch.cmd.Stderr = &ch.stderr
	var err error
	if ch.stdin, err = ch.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := ch.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a child left stopped or blocked by a failed test
		if ch.cmd.ProcessState == nil {
			_ = ch.cmd.Process.Kill()
			_ = ch.cmd.Wait()
		}
	})
	go func() {
		defer close(ch.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
	}()
	return ch
}

// expect returns the child's next line, which must start with prefix.
func (ch *child) expect(prefix string) string {
	ch.t.Helper()
	select {
	case line, ok := <-ch.lines:
		if !ok || !strings.HasPrefix(line, prefix) {
			ch.t.Fatalf("child: got %q (open %v), want a line starting %q; stderr:\n%s", line, ok, prefix, ch.stderr.String())
		}
		return line
	case <-time.After(20 * time.Second):
		ch.t.Fatalf("child: no %q line in 20s; stderr:\n%s", prefix, ch.stderr.String())
	}
	return ""
}

func (ch *child) signal(sig os.Signal) {
	ch.t.Helper()
	if err := ch.cmd.Process.Signal(sig); err != nil {
		ch.t.Fatalf("signal %v: %v", sig, err)
	}
}

func (ch *child) send(s string) {
	ch.t.Helper()
	if _, err := io.WriteString(ch.stdin, s); err != nil {
		ch.t.Fatalf("child stdin: %v", err)
	}
}

func (ch *child) wait() {
	ch.t.Helper()
	_ = ch.stdin.Close()
	for range ch.lines { // drain, so that Wait sees stdout closed
	}
	if err := ch.cmd.Wait(); err != nil {
		ch.t.Fatalf("child: %v; stderr:\n%s", err, ch.stderr.String())
	}
}
