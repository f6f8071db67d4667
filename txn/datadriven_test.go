package txn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/seed-992972ee/percolator/storage"
)

// TestScenarios runs the protocol scenarios in testdata/ (its files, not
// its folders) on each backend: with the single owner's in-memory index,
// without it, without it on a store that reads several rows in one call
// (as a server's), and on Bigtable's emulator. Regenerate with -rewrite.
func TestScenarios(t *testing.T) {
	files := scenarioFiles(t, "testdata")
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			for _, path := range files {
				t.Run(filepath.Base(path), func(t *testing.T) {
					s := &scenario{env: newEnvBackend(t, backend), txns: map[string]*scenarioTxn{}}
					datadriven.RunTest(t, path, s.run)
				})
			}
		})
	}
}

// TestOwnedScenarios runs the scenarios in testdata/owned/ on an embedded
// Pebble store whose owner runs the oracle (the scenario's counter is
// also the store's stamper): the store takes one-phase commits and async
// prewrites, which the other backends do not. Its clients commit
// asynchronously where a transaction qualifies (begin ... two-phase
// turns both off for that client). Regenerate with -rewrite.
func TestOwnedScenarios(t *testing.T) {
	for _, path := range scenarioFiles(t, filepath.Join("testdata", "owned")) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &scenario{env: newOwnedEnv(t), txns: map[string]*scenarioTxn{}}
			datadriven.RunTest(t, path, s.run)
		})
	}
}

// scenarioFiles lists the scenario files directly in dir.
func scenarioFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
	return files
}

type scenario struct {
	env  *env
	txns map[string]*scenarioTxn
}

type scenarioTxn struct {
	t        *Txn
	rows     []*rowWrites
	commitTS uint64
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
	st := func() *scenarioTxn {
		x := s.txns[arg("t")]
		if x == nil {
			d.Fatalf(t, "no transaction %q", arg("t"))
		}
		return x
	}
	switch d.Cmd {
	case "begin":
		c := s.env.clientWith(arg("client"), clientFlags{twoPhase: d.HasArg("two-phase"), push: d.HasArg("push"), stable: d.HasArg("stable")})
		tx, err := c.begin(ctx, d.HasArg("readonly"))
		if err != nil {
			return errString(err)
		}
		s.txns[arg("t")] = &scenarioTxn{t: tx}
		return fmt.Sprintf("start_ts=%d", tx.startTS) // StartTS would pin a fresh one
	case "set":
		if d.HasArg("reserved") {
			return errString(SetReserved(st().t, arg("row"), arg("col"), []byte(arg("value"))))
		}
		return errString(st().t.Set(arg("row"), arg("col"), []byte(arg("value"))))
	case "delete":
		return errString(st().t.Delete(arg("row"), arg("col")))
	case "get":
		x := st()
		if _, ok := x.t.find([]byte(arg("row")), arg("col")); ok {
			v, err := x.t.Get(ctx, arg("row"), arg("col"))
			if err != nil {
				return errString(err) + " (own write)"
			}
			return fmt.Sprintf("%q (own write)", v)
		}
		v, err := x.t.c.getOnce(ctx, x.t.startTS, []byte(arg("row")), arg("col"))
		for i := 0; err == errRetryNow && i < 10; i++ {
			v, err = x.t.c.getOnce(ctx, x.t.startTS, []byte(arg("row")), arg("col"))
		}
		if err != nil {
			return errString(err)
		}
		return fmt.Sprintf("%q", v)
	case "get-for-update":
		v, err := st().t.GetForUpdate(ctx, arg("row"), arg("col"))
		if err != nil {
			return errString(err)
		}
		return fmt.Sprintf("%q", v)
	case "prewrite":
		return s.prewrite(ctx, st(), arg("rows"))
	case "commit-ts":
		// The commit timestamp, taken now; commit-primary taken sends
		// the commit point with it later.
		x := st()
		x.commitTS, _ = x.t.c.oracle.Timestamp(ctx)
		return fmt.Sprintf("commit_ts=%d", x.commitTS)
	case "commit-primary":
		x := st()
		ts := x.commitTS
		if !d.HasArg("taken") {
			ts, _ = x.t.c.oracle.Timestamp(ctx)
		}
		// The commit point may take a newer timestamp (a push refused
		// it): what it committed at is what it returns.
		ts, err := x.t.c.commitPrimary(ctx, x.t, x.rows[0], ts)
		x.commitTS = ts
		return fmt.Sprintf("commit_ts=%d %s", ts, errString(err))
	case "replay-commit-primary":
		x := st()
		_, err := x.t.c.commitPrimary(ctx, x.t, x.rows[0], x.commitTS)
		return errString(err)
	case "commit-secondaries":
		x := st()
		x.t.c.commitSecondaries(ctx, x.t, x.rows[1:], x.commitTS)
		return "ok"
	case "abort":
		x := st()
		return errString(x.t.c.abort(ctx, x.t, x.rows, nil))
	case "commit":
		x := st()
		if p := arg("crash"); p != "" {
			x.t.c.crash = func(point string) bool { return point == p }
			defer func() { x.t.c.crash = nil }()
		}
		before := x.t.c.Stats()
		err := x.t.Commit(ctx)
		// An async commit's records are written in the background:
		// the scenario shows the store once they are in.
		x.t.c.background.Wait()
		return errString(err) + commitPath(before, x.t.c.Stats())
	case "heartbeat":
		x := st()
		ok, err := x.t.c.refreshLock(ctx, x.t.startTS, &x.t.writes[0])
		return fmt.Sprintf("refreshed=%v %s", ok, errString(err))
	case "kill":
		s.env.live.Unregister(arg("client"))
		return "ok"
	case "advance":
		dur, err := time.ParseDuration(arg("by"))
		if err != nil {
			d.Fatalf(t, "bad duration: %v", err)
		}
		s.env.clock.Advance(dur)
		return "ok"
	case "dump":
		return s.env.dump(strings.Split(arg("rows"), ","), arg("col"))
	case "locks":
		return s.locks(ctx)
	case "scan-rows":
		return s.scanRows(ctx, st(), arg)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// prewrite prewrites the named rows of x (all, primary first, when rows is
// empty). A row named again is a replayed (late or duplicated) delivery.
func (s *scenario) prewrite(ctx context.Context, x *scenarioTxn, rows string) string {
	if x.rows == nil {
		x.rows = groupByRow(x.t.writes)
	}
	var out []string
	for _, rw := range x.rows {
		if rows != "" && !strings.Contains(","+rows+",", ","+string(rw.row)+",") {
			continue
		}
		err := x.t.c.prewrite(ctx, x.t, rw, &x.t.writes[0], nil)
		out = append(out, fmt.Sprintf("%s: %s", rw.row, errString(err)))
	}
	return strings.Join(out, "\n")
}

// commitPath names the way a commit went where it was not two phases:
// one phase, or async.
func commitPath(before, after Stats) string {
	switch {
	case after.OnePhase > before.OnePhase:
		return " (one phase)"
	case after.Async > before.Async:
		return " (async)"
	}
	return ""
}

func (s *scenario) locks(ctx context.Context) string {
	var out []string
	f := storage.Filter{{Family: FamilyLock, AllQualifiers: true}}
	_ = s.env.store.Scan(ctx, nil, nil, f, 0, func(r storage.Row) bool {
		for _, c := range r.Cells {
			out = append(out, fmt.Sprintf("%s/%s@%d", r.Key, c.Qualifier, c.TS))
		}
		return true
	})
	if ix := s.env.base.index; ix != nil && ix.lockCount() != len(out) {
		out = append(out, fmt.Sprintf("INDEX MISMATCH: index has %d locks", ix.lockCount()))
	}
	if len(out) == 0 {
		return "no locks"
	}
	return strings.Join(out, "\n")
}

// scanRows reads pages of ScanRows from start to end (limit and bytes
// per page) until the range is done, one line per cell and per page.
func (s *scenario) scanRows(ctx context.Context, x *scenarioTxn, arg func(string) string) string {
	limit, _ := strconv.Atoi(arg("limit"))
	maxBytes, _ := strconv.Atoi(arg("bytes"))
	start, end := []byte(arg("start")), []byte(arg("end"))
	if len(end) == 0 {
		end = nil
	}
	var out []string
	for page := 1; ; page++ {
		cells, next, err := x.t.ScanRows(ctx, start, end, limit, maxBytes)
		if err != nil {
			return strings.Join(append(out, errString(err)), "\n")
		}
		out = append(out, fmt.Sprintf("page %d: %d cells, next %q", page, len(cells), next))
		for _, c := range cells {
			out = append(out, fmt.Sprintf("  %s/%s = %q", c.Row, c.Column, c.Value))
		}
		if next == nil {
			return strings.Join(out, "\n")
		}
		start = next
	}
}
