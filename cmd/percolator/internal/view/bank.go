package view

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/progress"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/workload"
)

// BankLabel is what a bank run's phase of the meter counts.
const BankLabel = "bank: transfers committed"

// BankProgress shows the bank's counts c on prog.
func BankProgress(prog *progress.Meter, c workload.BankCounts) {
	prog.Detail(c.Commits, fmt.Sprintf("%d snapshots, %d wrong", c.Snapshots, c.Wrong))
}

// BankReports sets where a bank run's reports go: acknowledgements to
// stdout (with opts.Record), wrong snapshots to stderr, the progress to
// prog (in the phase BankLabel, which the caller starts and ends) and to
// pub.
func BankReports(opts *workload.BankOptions, pub *runstatus.Publisher, prog *progress.Meter, stdout, stderr io.Writer) {
	var mu sync.Mutex // stderr's lines, from the progress and the auditors
	if opts.Record {
		opts.OnCommit = func(row string) { fmt.Fprintf(stdout, "ack %s\n", row) }
	}
	accounts, initial := opts.Accounts, opts.Initial
	opts.OnWrong = func(a workload.BankAudit) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "WRONG SNAPSHOT: %v\n", a.Check(accounts, initial))
	}
	opts.OnProgress = func(c workload.BankCounts, el time.Duration) {
		line := fmt.Sprintf("%5.0fs  commits %d  %.0f txn/s  snapshots %d  wrong %d", el.Seconds(),
			c.Commits, float64(c.Commits)/el.Seconds(), c.Snapshots, c.Wrong)
		BankProgress(prog, c)
		pub.Set(func(p *runstatus.Status) { p.Phase, p.Progress = "transfers", strings.TrimSpace(line) })
	}
}

// BankResult prints a bank run's result (workload.BankResult) as its
// line, or JSON.
func BankResult(w io.Writer, r workload.BankResult, jsonOut bool) error {
	if jsonOut {
		return JSON(w, struct {
			Commits   int64   `json:"commits"`
			Conflicts uint64  `json:"conflicts"`
			Resolved  uint64  `json:"locks_resolved"`
			Failures  int64   `json:"failures"`
			Snapshots int64   `json:"snapshots"`
			Wrong     int64   `json:"wrong_totals"`
			ElapsedS  float64 `json:"elapsed_s"`
			TxnPerS   float64 `json:"txn_per_s"`
		}{r.Commits, r.Conflicts, r.Resolved, r.Failures, r.Snapshots, r.Wrong, Seconds(r.Elapsed), r.TxnPerSec()})
	}
	_, err := fmt.Fprintln(w, r.String())
	return err
}
