package remote_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-992972ee/percolator/internal/faultproxy"
	"github.com/seed-992972ee/percolator/rpc"
	"github.com/seed-992972ee/percolator/server"
	"github.com/seed-992972ee/percolator/server/servertest"
	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/remote"
)

// The HBASE-3787 tests: client → faultproxy → server. The proxy loses the
// reply of a call the server applied; the client resends it with the same
// nonce; the server must answer from its nonce table and apply nothing.
//
// Only the call under test is in flight when the proxy is armed: a bare
// remote.Store sends nothing in the background, and New has registered
// its nonce group before the arming.

// env is a server, a proxy in front of it, and a remote store through the
// proxy.
type env struct {
	opts  server.Options
	srv   *servertest.Server
	proxy *faultproxy.Proxy
	st    *remote.Store
}

func newEnv(t *testing.T, opts server.Options, ropts remote.Options) *env {
	t.Helper()
	srv := servertest.Start(t, opts, "")
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := servertest.Dial(t, p.Addr(), rpc.DialOptions{})
	return &env{opts: opts, srv: srv, proxy: p, st: servertest.Store(t, conn, ropts)}
}

// awaitDrop waits until the proxy has dropped n responses.
func (e *env) awaitDrop(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.proxy.Dropped() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy dropped %d responses, want %d", e.proxy.Dropped(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// async runs f in a goroutine; the returned function waits for its error.
func async(f func() error) func() error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return func() error { return <-c }
}

var (
	ctr    = storage.Filter{{Family: "c", Qualifier: "n"}}
	casRow = []byte("cas")
	// The CAS creates c:x if it is absent; a run that finds it writes
	// c:dup instead, so a second run shows in the row.
	casPred    = storage.Filter{{Family: "c", Qualifier: "x"}}
	casIfTrue  = []storage.Mutation{storage.SetCell("c", "dup", 1, []byte("second run"))}
	casIfFalse = []storage.Mutation{storage.SetCell("c", "x", 1, []byte("created"))}
	mutRow     = []byte("mut")
)

// counter reads row's counter c:n straight from the server's store.
func counter(t *testing.T, srv *servertest.Server, row string) int64 {
	t.Helper()
	r, err := srv.Store().ReadRow(context.Background(), []byte(row), ctr)
	if err != nil || len(r.Cells) != 1 {
		t.Fatalf("reading counter %q: %v, %v", row, r.Cells, err)
	}
	return int64(decodeCounter(r.Cells[0].Value))
}

func decodeCounter(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// cells returns row's cells of family c as "qualifier@ts=value".
func cells(t *testing.T, srv *servertest.Server, row []byte) string {
	t.Helper()
	r, err := srv.Store().ReadRow(context.Background(), row, storage.Filter{{Family: "c", AllQualifiers: true}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range r.Cells {
		out = append(out, fmt.Sprintf("%s@%d=%s", c.Qualifier, c.TS, c.Value))
	}
	return strings.Join(out, " ")
}

// replays returns how many calls of method the server answered from its
// nonce table (percolator_nonce_replays_total).
func replays(t *testing.T, srv *servertest.Server, method string) float64 {
	t.Helper()
	return metric(t, srv, fmt.Sprintf("percolator_nonce_replays_total{method=%q}", method))
}

// metric returns the value of the sample named series (name{labels}), 0
// if absent.
func metric(t *testing.T, srv *servertest.Server, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	prefix := series + " "
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// lostReply is one non-idempotent call whose first reply is lost.
type lostReply struct {
	name string
	// prepare runs before the proxy is armed.
	prepare func(t *testing.T, e *env)
	// call is the call under test.
	call func(ctx context.Context, st *remote.Store) (string, error)
	// between runs after the drop, before the retry may reach the server
	// (on the server that will answer it).
	between func(t *testing.T, srv *servertest.Server)
	// state reads what the call changed.
	state func(t *testing.T, srv *servertest.Server) string
	// The call's result and the state after it ran once, and after it ran
	// twice (without nonces).
	onceResult, onceState   string
	twiceResult, twiceState string
}

var lostReplies = []lostReply{{
	name: "Increment",
	prepare: func(t *testing.T, e *env) {
		if n, err := e.st.Increment(context.Background(), []byte("ctr"), "c", "n", 1); err != nil || n != 1 {
			t.Fatalf("first Increment = %d, %v", n, err)
		}
	},
	call: func(ctx context.Context, st *remote.Store) (string, error) {
		n, err := st.Increment(ctx, []byte("ctr"), "c", "n", 10)
		return strconv.FormatInt(n, 10), err
	},
	state: func(t *testing.T, srv *servertest.Server) string {
		return strconv.FormatInt(counter(t, srv, "ctr"), 10)
	},
	onceResult: "11", onceState: "11",
	twiceResult: "21", twiceState: "21",
}, {
	name: "CheckAndMutate",
	call: func(ctx context.Context, st *remote.Store) (string, error) {
		matched, err := st.CheckAndMutate(ctx, casRow, casPred, casIfTrue, casIfFalse)
		return strconv.FormatBool(matched), err
	},
	// The first run creates the cell (matched=false); a second run would
	// find it and take the other branch.
	state:      func(t *testing.T, srv *servertest.Server) string { return cells(t, srv, casRow) },
	onceResult: "false", onceState: "x@1=created",
	twiceResult: "true", twiceState: "dup@1=second run x@1=created",
}, {
	name: "Mutate",
	call: func(ctx context.Context, st *remote.Store) (string, error) {
		return "", st.Mutate(ctx, mutRow, storage.Mutation{Kind: storage.DeleteCells, Family: "c", Qualifier: "x"}, storage.SetCell("c", "x", 5, []byte("first")))
	},
	// Another client writes the cell after the Mutate applied: a late
	// duplicate of the Mutate would erase that write.
	between: func(t *testing.T, srv *servertest.Server) {
		if err := srv.Store().Mutate(context.Background(), mutRow, storage.SetCell("c", "x", 7, []byte("later"))); err != nil {
			t.Fatal(err)
		}
	},
	state:     func(t *testing.T, srv *servertest.Server) string { return cells(t, srv, mutRow) },
	onceState: "x@7=later x@5=first", twiceState: "x@5=first",
}, {
	// A batch that deletes a cell (as a weak graph label's edge delete
	// did): its late copy would erase a later write of the cell.
	name: "MutateRows",
	call: func(ctx context.Context, st *remote.Store) (string, error) {
		errs, err := st.MutateRows(ctx, []storage.RowMutation{
			{Row: mutRow, Mutations: []storage.Mutation{{Kind: storage.DeleteCells, Family: "c", Qualifier: "x"}}},
			{Row: []byte("mut2"), Mutations: []storage.Mutation{storage.SetCell("c", "y", 1, []byte("other"))}},
		})
		if err == nil {
			err = errors.Join(errs...)
		}
		return "", err
	},
	between: func(t *testing.T, srv *servertest.Server) {
		if err := srv.Store().Mutate(context.Background(), mutRow, storage.SetCell("c", "x", 7, []byte("re-inserted"))); err != nil {
			t.Fatal(err)
		}
	},
	state:     func(t *testing.T, srv *servertest.Server) string { return cells(t, srv, mutRow) },
	onceState: "x@7=re-inserted", twiceState: "",
}}

// runLostReply arms the proxy, sends the call, lets the retry through
// after between, and returns the call's result.
func runLostReply(t *testing.T, e *env, c lostReply) string {
	t.Helper()
	if c.prepare != nil {
		c.prepare(t, e)
	}
	e.proxy.DropNextResponseThenRefuse()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var res string
	wait := async(func() (err error) { res, err = c.call(ctx, e.st); return err })
	e.awaitDrop(t, 1)
	if c.between != nil {
		c.between(t, e.srv)
	}
	e.proxy.SetRefuse(false)
	if err := wait(); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return res
}

// TestLostReplyAppliedOnce: with nonces, the retry of a call whose reply
// was lost returns the first run's result and applies nothing.
func TestLostReplyAppliedOnce(t *testing.T) {
	for _, c := range lostReplies {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, server.Options{}, remote.Options{})
			if got := runLostReply(t, e, c); got != c.onceResult {
				t.Errorf("%s returned %q, want the first run's %q", c.name, got, c.onceResult)
			}
			if got := c.state(t, e.srv); got != c.onceState {
				t.Errorf("after %s: %q, want %q (applied once)", c.name, got, c.onceState)
			}
			if n := replays(t, e.srv, c.name); n != 1 {
				t.Errorf("the server answered %v %s calls from its nonce table, want 1", n, c.name)
			}
		})
	}
}

// TestLostReplyWithoutNoncesAppliesTwice tests the test above: without
// nonces the same scenario applies each call twice, so it can fail.
func TestLostReplyWithoutNoncesAppliesTwice(t *testing.T) {
	for _, c := range lostReplies {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, server.Options{}, remote.Options{NoNonces: true})
			if got := runLostReply(t, e, c); got != c.twiceResult {
				t.Errorf("%s without nonces returned %q, want the second run's %q", c.name, got, c.twiceResult)
			}
			if got := c.state(t, e.srv); got != c.twiceState {
				t.Errorf("after %s without nonces: %q, want %q (applied twice)", c.name, got, c.twiceState)
			}
		})
	}
}

// TestLostReplyAcrossRestart: the server applies the call, the reply is
// lost, and the power is cut (the server's disk keeps what it synced);
// a new server on that disk, at the same address, answers the client's
// retry from the nonce table it loaded, and applies nothing.
func TestLostReplyAcrossRestart(t *testing.T) {
	for _, c := range lostReplies {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			e := newEnv(t, server.Options{FS: fs, Dir: "/db"}, remote.Options{})
			first := e.srv
			between := c.between
			c.between = func(t *testing.T, _ *servertest.Server) {
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				first.Kill()
				e.srv = servertest.Start(t, server.Options{FS: crashed, Dir: "/db"}, first.Addr)
				if between != nil {
					between(t, e.srv)
				}
			}
			if got := runLostReply(t, e, c); got != c.onceResult {
				t.Errorf("%s returned %q, want the first run's %q", c.name, got, c.onceResult)
			}
			if got := c.state(t, e.srv); got != c.onceState {
				t.Errorf("after %s: %q, want %q (applied once)", c.name, got, c.onceState)
			}
			if n := replays(t, e.srv, c.name); n != 1 {
				t.Errorf("the restarted server answered %v %s calls from its nonce table, want 1", n, c.name)
			}
		})
	}
}

// expire waits until the server has forgotten every nonce group.
func expire(t *testing.T, srv *servertest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, srv, "percolator_nonce_table_groups") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the nonce group did not expire")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var shortGrace = server.Options{NonceGrace: 300 * time.Millisecond, FlushInterval: 5 * time.Millisecond}

// A client idle past the server's NonceGrace finds its group forgotten;
// its next call, refused on its first attempt (so never applied), opens a
// new group and goes through.
func TestExpiredGroupIsReopened(t *testing.T) {
	srv := servertest.Start(t, shortGrace, "")
	st := servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	ctx := context.Background()
	if n, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil || n != 1 {
		t.Fatalf("Increment = %d, %v", n, err)
	}
	expire(t, srv)
	if n, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil || n != 2 {
		t.Fatalf("Increment after the group expired = %d, %v; want 2", n, err)
	}
}

// Calls refused together for one expired group open one new group between
// them, not one each (a group opened by one call must not be replaced,
// its numbering restarted, under the calls another has begun in it).
func TestConcurrentCallsAfterExpiryShareOneNewGroup(t *testing.T) {
	srv := servertest.Start(t, shortGrace, "")
	st := servertest.Store(t, servertest.Dial(t, srv.Addr, rpc.DialOptions{}), remote.Options{})
	ctx := context.Background()
	if _, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1); err != nil {
		t.Fatal(err)
	}
	expire(t, srv)
	const callers = 16
	start := make(chan struct{})
	errs := make(chan error, callers)
	for range callers {
		go func() {
			<-start
			_, err := st.Increment(ctx, []byte("ctr"), "c", "n", 1)
			errs <- err
		}()
	}
	close(start)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if c := counter(t, srv, "ctr"); c != 1+callers {
		t.Fatalf("counter %d, want %d", c, 1+callers)
	}
	if g := metric(t, srv, "percolator_nonce_table_groups"); g > 1 {
		t.Fatalf("%v groups after the concurrent calls, want 1", g)
	}
}

// TestOnePhaseRefusedResendIsUnknown: a one-phase commit carries no
// nonce; its reply is lost, and the resend finds the first copy's
// commit records and is refused. A refusal answered to a resend must not
// read as a conflict (the caller would report its own commit failed, or,
// had the first copy been delayed rather than applied, miss that it may
// still land): it is storage.ErrUnavailable, which the caller settles
// from the row.
func TestOnePhaseRefusedResendIsUnknown(t *testing.T) {
	e := newEnv(t, server.Options{}, remote.Options{})
	row := []byte("onephase")
	// Any commit record of the cell refuses the call: the first copy's
	// too, whatever timestamp the server's oracle stamped it with.
	pred := storage.Filter{{Family: "c", Qualifier: "v", Time: storage.From(1)}}
	stamped := []storage.Mutation{storage.SetCell("c", "v", 0, []byte("record"))}
	e.proxy.DropNextResponseThenRefuse()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var conflict bool
	wait := async(func() (err error) {
		_, conflict, err = e.st.CommitOnePhase(ctx, row, pred, nil, stamped, nil)
		return err
	})
	e.awaitDrop(t, 1)
	e.proxy.SetRefuse(false)
	err := wait()
	if !errors.Is(err, storage.ErrUnavailable) || conflict {
		t.Fatalf("the resend of an applied one-phase commit: conflict %v, %v; want storage.ErrUnavailable", conflict, err)
	}
	if got := cells(t, e.srv, row); strings.Count(got, "record") != 1 {
		t.Fatalf("row %q; want the one commit record of the first copy", got)
	}
	// Sent afresh, the same call is a plain conflict: no copy of it
	// failed.
	if _, conflict, err := e.st.CommitOnePhase(ctx, row, pred, nil, stamped, nil); err != nil || !conflict {
		t.Fatalf("a first send refused: conflict %v, %v; want a conflict", conflict, err)
	}
}
