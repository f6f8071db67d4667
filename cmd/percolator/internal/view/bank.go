package view

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/workload"
)

// BankReports sets where a bank run's reports go: acknowledgements to
// stdout (with opts.Record), wrong snapshots and (unless quiet) a
// progress line every second to stderr, and the progress to pub.
func BankReports(opts *workload.BankOptions, pub *runstatus.Publisher, quiet bool, stdout, stderr io.Writer) {
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
		if !quiet {
			mu.Lock()
			fmt.Fprintln(stderr, line)
			mu.Unlock()
		}
		pub.Set(func(p *runstatus.Status) { p.Phase, p.Progress = "transfers", strings.TrimSpace(line) })
	}
}
