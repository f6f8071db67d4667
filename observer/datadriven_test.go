package observer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/seed-992972ee/percolator/coord"
	"github.com/seed-992972ee/percolator/internal/manualclock"
	"github.com/seed-992972ee/percolator/oracle"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/txn"
)

// TestScenarios runs the observer protocol's scenarios in testdata/, step
// by step on one goroutine: writes, notifications, a scanner's steps
// (scan, run, clear) taken one at a time so that a crash between two of
// them is a step left out, whole passes, quarantine and weak
// notifications. Time is a manual clock. Regenerate with -rewrite.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := newScenario(t)
		datadriven.RunTest(t, path, s.run)
	})
}

// scenario is one scenario file's world: a store, a client, a framework
// with observers whose behaviour the file sets (behave), and the log of
// what their code did since the last step.
type scenario struct {
	t     *testing.T
	env   *env
	clock *manualclock.Clock
	mu    sync.Mutex
	log   []string
	modes map[string]string // observer → behaviour
	seen  map[string]scanned
	// runFrom is the oldest start_ts of the runs a run step made of each
	// cell since its scan: what the clear step checks newer writes
	// against, as a scanner does.
	runFrom map[string]uint64
}

// scanned is what a scan step saw of one notified cell: the versions its
// clear may delete, and those written ahead of their prewrite.
type scanned struct{ seen, ahead []uint64 }

func newScenario(t *testing.T) *scenario {
	ctx := context.Background()
	clock := manualclock.New(time.Unix(1_700_000_000, 0))
	st := memory.New()
	alloc, err := oracle.OpenAllocator("", oracle.AllocatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orc := oracle.NewClient(alloc)
	live := coord.NewLocal()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := txn.NewClient(ctx, st, orc, live, txn.Options{Now: clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	live.Register(c.Owner())
	f, err := New(ctx, st, c, orc, coord.NewLocalLocker(), Options{MaxFailures: 2, RetryBackoff: time.Second, Now: clock.Now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); _ = alloc.Close(); _ = st.Close() })
	e := &env{t: t, store: st, client: c, f: f}
	return &scenario{t: t, env: e, clock: clock, modes: map[string]string{}, seen: map[string]scanned{}, runFrom: map[string]uint64{}}
}

func (s *scenario) logf(format string, a ...any) {
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf(format, a...))
	s.mu.Unlock()
}

// takeLog returns what the observers did since the last step, then out.
func (s *scenario) takeLog(out ...string) string {
	s.mu.Lock()
	lines := append(s.log, out...)
	s.log = nil
	s.mu.Unlock()
	if len(lines) == 0 {
		return "nothing"
	}
	return strings.Join(lines, "\n")
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	arg := func(key string) string {
		for _, a := range d.CmdArgs {
			if a.Key == key && len(a.Vals) > 0 {
				return a.Vals[0]
			}
		}
		return ""
	}
	switch d.Cmd {
	case "register":
		name, col := arg("name"), arg("col")
		s.modes[name] = "copy"
		err := s.env.f.Register(ctx, Observer{Name: name, Column: col, Weak: d.HasArg("weak"), Fn: s.observerFn(name)})
		return s.takeLog(errString(err))
	case "behave":
		s.modes[arg("name")] = arg("as")
		return "ok"
	case "write":
		return s.write(ctx, arg("row"), arg("col"), arg("value"))
	case "notify":
		return errString(s.env.f.Notify(ctx, arg("row"), arg("col")))
	case "notifications":
		return s.notifications(ctx)
	case "scan":
		return s.scan(ctx)
	case "run":
		return s.runStep(ctx, arg("row"), arg("col"))
	case "clear":
		return s.clearStep(ctx, arg("row"), arg("col"))
	case "pass":
		return s.pass(ctx)
	case "get":
		return s.get(ctx, arg("row"), arg("col"))
	case "ack":
		return s.ack(ctx, arg("row"), arg("col"), arg("name"))
	case "quarantine":
		return s.quarantine(ctx)
	case "retry":
		n, err := s.env.f.Retry(ctx, nil)
		return fmt.Sprintf("requeued %d %s", n, errString(err))
	case "advance":
		dur, err := time.ParseDuration(arg("by"))
		if err != nil {
			d.Fatalf(t, "bad duration: %v", err)
		}
		s.clock.Advance(dur)
		return "ok"
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// observerFn is observer name's code: as the scenario says it behaves.
// "copy" writes the value it reads of the observed column to column out
// (a weak observer's column holds none: it counts its runs in out);
// "fail" returns an error; "race" first runs the same change again in
// another transaction, which commits while this one is running.
func (s *scenario) observerFn(name string) Func {
	return func(ctx context.Context, tx *txn.Txn, row, col string) error {
		switch s.modes[name] {
		case "fail":
			s.logf("%s failed on %s/%s", name, row, col)
			return errors.New("the observer's own failure")
		case "race":
			s.modes[name] = "copy"
			s.logf("%s began on %s/%s; another run of the same change starts", name, row, col)
			for _, line := range s.runOne(ctx, row, col) {
				s.logf("  (the other run) %s", line)
			}
			s.modes[name] = "race"
		}
		v, err := tx.Get(ctx, row, col)
		switch {
		case errors.Is(err, txn.ErrNotFound):
			n := 0
			if prev, err := tx.Get(ctx, row, "out"); err == nil {
				n, _ = strconv.Atoi(string(prev))
			}
			s.logf("%s ran on %s/%s (run %d)", name, row, col, n+1)
			return tx.Set(row, "out", []byte(strconv.Itoa(n+1)))
		case err != nil:
			return err
		}
		s.logf("%s ran on %s/%s: read %q, wrote out", name, row, col, v)
		return tx.Set(row, "out", v)
	}
}

// write commits one write of (row, col).
func (s *scenario) write(ctx context.Context, row, col, value string) string {
	tx, err := s.env.client.Begin(ctx)
	if err != nil {
		return errString(err)
	}
	if err := tx.Set(row, col, []byte(value)); err != nil {
		return errString(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return errString(err)
	}
	return fmt.Sprintf("committed start_ts=%d", tx.StartTS())
}

// notifications lists every notification: row, column, version, and
// whether it was written ahead of its prewrite.
func (s *scenario) notifications(ctx context.Context) string {
	var out []string
	_, err := s.env.f.notify.Scan(ctx, nil, nil, 0, func(row []byte, ns []txn.Notification) bool {
		for _, n := range ns {
			line := fmt.Sprintf("%s/%s@%d", row, n.Column, n.TS)
			if n.Ahead {
				line += " (ahead)"
			}
			out = append(out, line)
		}
		return true
	})
	if err != nil {
		return errString(err)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "\n")
}

// scan is a scanner's first step: it reads the notify keyspace and keeps
// the versions seen of each cell for the clear step.
func (s *scenario) scan(ctx context.Context) string {
	rows, err := s.env.f.scanNotify(ctx, nil, nil, 0)
	if err != nil {
		return errString(err)
	}
	clear(s.seen)
	clear(s.runFrom)
	var out []string
	for _, r := range rows {
		for _, n := range r.ns {
			k := string(r.Key) + "/" + n.Column
			sc := s.seen[k]
			sc.seen = append(sc.seen, n.TS)
			if n.Ahead {
				sc.ahead = append(sc.ahead, n.TS)
			}
			s.seen[k] = sc
		}
	}
	for k, sc := range s.seen {
		out = append(out, fmt.Sprintf("%s: versions %v", k, sc.seen))
	}
	slices.Sort(out)
	if len(out) == 0 {
		return "nothing notified"
	}
	return strings.Join(out, "\n")
}

// runStep runs every observer of (row, col) once, as a scanner does
// after its scan, without clearing.
func (s *scenario) runStep(ctx context.Context, row, col string) string {
	return s.takeLog(s.runOne(ctx, row, col)...)
}

// runOne runs each observer of (row, col) and says how each run ended.
func (s *scenario) runOne(ctx context.Context, row, col string) []string {
	set, err := s.env.f.reg.refresh(ctx)
	if err != nil {
		return []string{errString(err)}
	}
	var out []string
	for _, g := range set.byCol[col] {
		if s.env.f.fails.waiting(row, col, g.name) {
			out = append(out, fmt.Sprintf("%s: waiting out its back-off", g.name))
			continue
		}
		start, ok, ran, quarantined, err := s.env.f.runOne(ctx, row, col, g)
		if k := row + "/" + col; s.runFrom[k] == 0 || start < s.runFrom[k] {
			s.runFrom[k] = start
		}
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: error %v", g.name, err))
		case quarantined:
			out = append(out, fmt.Sprintf("%s: quarantined", g.name))
		case ok && ran:
			out = append(out, fmt.Sprintf("%s: committed", g.name))
		case ok:
			out = append(out, fmt.Sprintf("%s: clean, not run", g.name))
		case ran:
			out = append(out, fmt.Sprintf("%s: not committed (the notification stays)", g.name))
		}
	}
	return out
}

// clearStep is a scanner's last step for (row, col): it clears the
// versions the scan step saw, unless a write exists that is newer than
// the run steps since the scan began.
func (s *scenario) clearStep(ctx context.Context, row, col string) string {
	sc := s.seen[row+"/"+col]
	minStart := s.runFrom[row+"/"+col]
	if len(sc.seen) == 0 || minStart == 0 {
		return "nothing seen and run to clear"
	}
	cleared, err := s.env.f.clear(ctx, []byte(row), col, sc.seen, sc.ahead, minStart, false)
	if err != nil {
		return errString(err)
	}
	if !cleared {
		return fmt.Sprintf("kept versions %v: a newer write exists", sc.seen)
	}
	return fmt.Sprintf("cleared versions %v", sc.seen)
}

// pass is one scanner pass over the whole keyspace from its start: scan,
// run, clear, for every notified cell.
func (s *scenario) pass(ctx context.Context) string {
	sc := &scanner{f: s.env.f, opts: WorkerOptions{Batch: 64}, owner: "scenario/scanner"}
	sc.opts.ensureDefaults()
	worked, pending, err := sc.pass(ctx, [][2][]byte{{nil, nil}}, newIdleTracker(1))
	return s.takeLog(fmt.Sprintf("pass: worked=%v pending=%v %s", worked, pending, errString(err)))
}

func (s *scenario) get(ctx context.Context, row, col string) string {
	tx, err := s.env.client.BeginReadOnly(ctx)
	if err != nil {
		return errString(err)
	}
	v, err := tx.Get(ctx, row, col)
	if err != nil {
		return errString(err)
	}
	return fmt.Sprintf("%q", v)
}

// ack shows observer name's ack of (row, col): the start_ts of its last
// committed run there.
func (s *scenario) ack(ctx context.Context, row, col, name string) string {
	tx, err := s.env.client.BeginReadOnly(ctx)
	if err != nil {
		return errString(err)
	}
	v, err := txn.GetReserved(ctx, tx, row, AckColumn(name, col))
	if err != nil {
		return errString(err)
	}
	if len(v) != 8 {
		return fmt.Sprintf("malformed %q", v)
	}
	return fmt.Sprintf("acked at %d", binary.BigEndian.Uint64(v))
}

func (s *scenario) quarantine(ctx context.Context) string {
	qs, err := s.env.f.Quarantine(ctx)
	if err != nil {
		return errString(err)
	}
	if len(qs) == 0 {
		return "none"
	}
	var out []string
	for _, q := range qs {
		out = append(out, fmt.Sprintf("%s/%s %s after %d failures: %s", q.Row, q.Column, q.Observer, q.Failures, q.Error))
	}
	return strings.Join(out, "\n")
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return "error: " + err.Error()
}
