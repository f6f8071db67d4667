package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/history"
	"github.com/seed-992972ee/percolator/workload"
)

// Report is what a run found, as report.json holds it.
type Report struct {
	Workload string         `json:"workload"`
	Target   string         `json:"target"` // dir, server, distributed, or the existing deployment's flags
	Faults   map[string]int `json:"faults"` // faults injected, by kind and role
	Seconds  float64        `json:"duration_s"`
	Events   int            `json:"events"`
	Torn     int            `json:"torn_histories"` // client histories whose last line a kill tore
	Result   history.Result `json:"result"`
	Removed  int            `json:"cells_removed,omitempty"` // the cells the run wrote on an existing deployment and removed
	Out      string         `json:"out"`
}

// Valid reports whether no forbidden anomaly was found.
func (r *Report) Valid() bool { return r.Result.Valid }

// Verdict is the report's summary lines.
func (r *Report) Verdict() string {
	var b strings.Builder
	verdict := "VALID: no forbidden anomaly"
	if !r.Valid() {
		verdict = "INVALID: forbidden anomalies found"
	}
	fmt.Fprintf(&b, "%s\n", verdict)
	fmt.Fprintf(&b, "workload %s on %s for %.0fs; faults: %s\n", r.Workload, r.Target, r.Seconds, faultList(r.Faults))
	fmt.Fprintf(&b, "operations: %d ok, %d failed, %d unknown (%d events", r.Result.OK, r.Result.Fail, r.Result.Info, r.Events)
	if r.Torn > 0 {
		fmt.Fprintf(&b, "; %d histories torn by kills", r.Torn)
	}
	b.WriteString(")\n")
	for _, k := range slices.Sorted(maps.Keys(r.Result.Counts)) {
		fmt.Fprintf(&b, "%s %s: %d%s\n", countLabel(r.Result, k), k, r.Result.Counts[k], allowedNote(r.Result, k))
	}
	if r.Removed > 0 {
		fmt.Fprintf(&b, "removed the run's %d cells from the deployment\n", r.Removed)
	}
	fmt.Fprintf(&b, "history and report in %s\n", r.Out)
	return b.String()
}

// countLabel says whether a count is of anomalies or a note (what was
// left unchecked, items delivered again): only anomalies have examples.
func countLabel(res history.Result, kind string) string {
	for _, a := range res.Anomalies {
		if a.Kind == kind {
			return "anomaly"
		}
	}
	return "note"
}

func allowedNote(res history.Result, kind string) string {
	for _, a := range res.Anomalies {
		if a.Kind == kind && !a.Forbidden {
			return " (allowed under snapshot isolation)"
		}
	}
	return ""
}

func faultList(f map[string]int) string {
	if len(f) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		parts = append(parts, fmt.Sprintf("%s x%d", k, f[k]))
	}
	return strings.Join(parts, ", ")
}

// check merges and checks the history.
func (r *run) check(elapsed time.Duration) (*Report, []history.Op, error) {
	h, torn, err := r.merge()
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{Workload: r.o.Workload, Target: r.targetName(), Faults: r.faults, Seconds: elapsed.Seconds(),
		Events: len(h), Torn: torn, Out: r.o.Out}
	rep.Result = mustChecked(r.o.Workload).Check(h)
	return rep, h, nil
}

func (r *run) targetName() string {
	switch {
	case r.o.Target != "":
		return r.o.Target
	case r.o.Server != "":
		return "--server " + r.o.Server
	}
	return "--bigtable " + r.o.Bigtable + " --etcd " + r.o.Etcd
}

// write writes history.jsonl, report.json, report.txt (the verdict and
// every anomaly's operations) and, for a register failure, register.html.
func (r *run) write(h []history.Op, rep *Report) error {
	var hist bytes.Buffer
	enc := history.NewEncoder(&hist)
	for _, o := range h {
		if err := enc.Write(o); err != nil {
			return err
		}
	}
	js, err := marshal(rep)
	if err != nil {
		return err
	}
	files := map[string][]byte{"history.jsonl": hist.Bytes(), "report.json": js, "report.txt": []byte(rep.Verdict() + anomalies(rep.Result))}
	if len(rep.Result.HTML) > 0 {
		files["register.html"] = rep.Result.HTML
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(r.o.Out, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.Bytes(), err
}

// anomalies renders each anomaly found with its operations.
func anomalies(res history.Result) string {
	var b strings.Builder
	for _, a := range res.Anomalies {
		fmt.Fprintf(&b, "\n%s (forbidden: %v): %s\n", a.Kind, a.Forbidden, a.Explanation)
		for _, o := range a.Ops {
			fmt.Fprintf(&b, "  %s\n", o)
		}
	}
	return b.String()
}

// Remove deletes, in transactions, every row under prefix that the
// checked workloads write, and returns how many cells it deleted: a run
// on an existing deployment removes its own rows at the end, and
// percolator verify --cleanup what killed runs left (prefix RowPrefix).
// The observer workload's observers of runs under prefix are removed
// first (workload.IsObserverUnder), then their columns' cells; the
// registry keeps the name as unregistered (package observer's rule), and
// the deployment's scanners clear the notifications left.
func Remove(ctx context.Context, open func(context.Context) (*percolator.DB, error), prefix string) (int, error) {
	db, err := open(ctx)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return 0, fmt.Errorf("verify: listing observers: %w", err)
	}
	columns := []string{workload.Column}
	for _, o := range st.Observers {
		if !workload.IsObserverUnder(o.Name, prefix) {
			continue
		}
		if err := db.Unobserve(ctx, o.Name); err != nil {
			return 0, fmt.Errorf("verify: removing observer %s: %w", o.Name, err)
		}
		columns = append(columns, o.Column)
	}
	removed := 0
	for _, col := range columns {
		n, err := removeColumn(ctx, db, prefix, col)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// removeColumn deletes column's cells of the rows under prefix.
func removeColumn(ctx context.Context, db *percolator.DB, prefix, column string) (int, error) {
	removed := 0
	for {
		var n int
		err := db.Update(ctx, func(tx *percolator.Txn) error {
			kvs, err := tx.Scan(ctx, prefix, prefix+"\xff", column, 500)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				if err := tx.Delete(string(kv.Row), column); err != nil {
					return err
				}
			}
			n = len(kvs)
			return nil
		})
		if err != nil {
			return removed, fmt.Errorf("verify: removing rows under %q: %w", prefix, err)
		}
		removed += n
		if n == 0 {
			return removed, nil
		}
	}
}
