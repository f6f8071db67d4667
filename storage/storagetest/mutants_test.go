package storagetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seed-992972ee/percolator/storage"
	"github.com/seed-992972ee/percolator/storage/memory"
	"github.com/seed-992972ee/percolator/storage/storagetest"
)

// The suite must be able to fail. Each mutant breaks the memory store in
// one way, and the named subtest must catch it. Mutants run in a child
// process (a failing subtest cannot be contained in this one).
var mutants = map[string]string{ // mutant -> subtest that must fail
	"ignore-limit":       "Limit",
	"time-end-inclusive": "TimeRange",
	"scan-ignores-end":   "Scan",
	"scan-ignores-limit": "ScanManyRows",
	"scan-empty-rows":    "ScanSkipsUnselectedRows",
	"cas-not-atomic":     "ConcurrentCAS",
	"torn-writes":        "ConcurrentRows",
	"partial-writes":     "BadInput",
	"hook-drops-calls":   "ApplyHookConcurrent",
	"hook-empty-calls":   "ApplyHook",
	"close-noop":         "Closed",
	"increment-no-read":  "Increment",
	"shared-values":      "Copies",
	"mutaterows-reorder": "MutateRows",
	"cond-unlatched":     "Conditioned",
}

const mutantEnv = "STORAGETEST_MUTANT"

func TestSuiteCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	for name, sub := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutantTarget$/^"+sub+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestMutantTarget/"+sub) {
				t.Fatalf("subtest %s did not catch mutant %s (err %v):\n%s", sub, name, err, out)
			}
		})
	}
}

// TestMutantTarget runs the suite on the mutant named by the environment.
func TestMutantTarget(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("only run by TestSuiteCatchesMutants")
	}
	storagetest.Run(t, func(t *testing.T) storage.Store { return &mutant{Store: memory.New(), name: name} })
}

type mutant struct {
	*memory.Store
	name   string
	shared [][]byte
}

func (m *mutant) ReadRow(ctx context.Context, row []byte, f storage.Filter) (storage.Row, error) {
	f = append(storage.Filter(nil), f...)
	for i := range f {
		switch m.name {
		case "ignore-limit":
			f[i].Limit = 0
		case "time-end-inclusive":
			if f[i].Time.End != 0 {
				f[i].Time.End++
			}
		}
	}
	r, err := m.Store.ReadRow(ctx, row, f)
	if m.name == "shared-values" {
		for i := range r.Cells {
			m.shared = append(m.shared, r.Cells[i].Value)
			if len(m.shared) > 1 {
				r.Cells[i].Value = m.shared[0] // hand out the same slice again
			}
		}
	}
	return r, err
}

func (m *mutant) Scan(ctx context.Context, start, end []byte, f storage.Filter, limit int, fn func(storage.Row) bool) error {
	switch m.name {
	case "scan-ignores-end":
		end = nil
	case "scan-ignores-limit":
		limit = 0
	case "scan-empty-rows":
		var broad storage.Filter
		for _, s := range f {
			broad = append(broad, storage.Selector{Family: s.Family, AllQualifiers: true})
		}
		return m.Store.Scan(ctx, start, end, broad, limit, func(r storage.Row) bool {
			got, _ := m.Store.ReadRow(ctx, r.Key, f)
			return fn(got)
		})
	}
	return m.Store.Scan(ctx, start, end, f, limit, fn)
}

func (m *mutant) Mutate(ctx context.Context, row []byte, ms ...storage.Mutation) error {
	if m.name != "torn-writes" && m.name != "partial-writes" {
		return m.Store.Mutate(ctx, row, ms...)
	}
	for i, mu := range ms {
		if i > 0 && m.name == "torn-writes" {
			// A real backend that tears a write leaves the gap open for an
			// I/O; widen it so that concurrent readers reliably land in it
			// however the machine schedules them.
			time.Sleep(200 * time.Microsecond)
		}
		if err := m.Store.Mutate(ctx, row, mu); err != nil {
			return err
		}
	}
	return nil
}

func (m *mutant) CheckAndMutate(ctx context.Context, row []byte, p storage.Filter, ifTrue, ifFalse []storage.Mutation) (bool, error) {
	if m.name != "cas-not-atomic" {
		return m.Store.CheckAndMutate(ctx, row, p, ifTrue, ifFalse)
	}
	r, err := m.Store.ReadRow(ctx, row, p)
	if err != nil {
		return false, err
	}
	matched := len(r.Cells) > 0
	if matched {
		return true, m.Store.Mutate(ctx, row, ifTrue...)
	}
	return false, m.Store.Mutate(ctx, row, ifFalse...)
}

func (m *mutant) CheckAndMutateCond(ctx context.Context, row []byte, cond storage.Cond, p storage.Filter, ifTrue, ifFalse []storage.Mutation, deferred bool) (bool, error) {
	if m.name != "cond-unlatched" || cond == nil {
		return m.Store.CheckAndMutateCond(ctx, row, cond, p, ifTrue, ifFalse, deferred)
	}
	// Evaluate cond before taking the latch, with a gap an I/O would leave.
	if len(row) == 0 {
		return m.Store.CheckAndMutateCond(ctx, row, cond, p, ifTrue, ifFalse, deferred)
	}
	holds, decided := cond()
	time.Sleep(200 * time.Microsecond)
	return m.Store.CheckAndMutateCond(ctx, row, func() (bool, bool) { return holds, decided }, p, ifTrue, ifFalse, deferred)
}

func (m *mutant) Increment(ctx context.Context, row []byte, family, qualifier string, delta int64) (int64, error) {
	if m.name == "increment-no-read" {
		_ = m.Store.Mutate(ctx, row, storage.Mutation{Kind: storage.DeleteCells, Family: family, Qualifier: qualifier})
	}
	return m.Store.Increment(ctx, row, family, qualifier, delta)
}

func (m *mutant) MutateRows(ctx context.Context, rows []storage.RowMutation) ([]error, error) {
	if m.name == "mutaterows-reorder" {
		rows = append([]storage.RowMutation(nil), rows...)
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	return m.Store.MutateRows(ctx, rows)
}

func (m *mutant) SetApplyHook(h storage.ApplyHook) (func(), error) {
	if h == nil {
		return m.Store.SetApplyHook(nil)
	}
	n := 0
	return m.Store.SetApplyHook(func(row []byte, ms []storage.Mutation) {
		n++
		switch {
		case m.name == "hook-drops-calls" && n%7 == 0:
		case m.name == "hook-empty-calls":
			h(row, ms)
			h(row, nil)
		default:
			h(row, ms)
		}
	})
}

func (m *mutant) Close() error {
	if m.name == "close-noop" {
		return nil
	}
	return m.Store.Close()
}
