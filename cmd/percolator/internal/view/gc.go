package view

import (
	"fmt"
	"io"
	"time"

	"github.com/seed-992972ee/percolator"
)

// GCReport is what `gc` prints, as JSON.
type GCReport struct {
	DryRun    bool    `json:"dry_run"`
	SafePoint uint64  `json:"safe_point"`
	Rows      int     `json:"rows_visited"`
	Versions  int     `json:"versions_removed"`
	Bytes     int     `json:"bytes_removed"`
	Skipped   int     `json:"rows_skipped"`
	Duration  float64 `json:"duration_s"`
	Resumed   bool    `json:"resumed"`
}

// GCReportOf is the report of a pass.
func GCReportOf(r percolator.GCResult) GCReport {
	return GCReport{DryRun: r.DryRun, SafePoint: r.SafePoint, Rows: r.Rows, Versions: r.Versions, Bytes: r.Bytes,
		Skipped: r.Skipped, Duration: r.Duration.Seconds(), Resumed: r.Resumed}
}

// PrintGC prints a pass's result.
func PrintGC(w io.Writer, r percolator.GCResult) {
	verb := "removed"
	if r.DryRun {
		verb = "would remove (dry run: nothing was changed)"
	}
	fmt.Fprintf(w, "garbage collection below safe point %d: %d rows visited in %s; %s %d versions (%s)\n",
		r.SafePoint, r.Rows, r.Duration.Round(time.Millisecond), verb, r.Versions, Bytes(int64(r.Bytes)))
	if r.Resumed {
		fmt.Fprintln(w, "this finished a pass that was interrupted (from the row it had reached): run gc again for a new pass")
	}
	if r.Skipped > 0 {
		fmt.Fprintf(w, "%d rows left for a live transaction's lock: a later pass collects them\n", r.Skipped)
	}
}

// GCState is the collector's state in `status`.
type GCState struct {
	SafePoint uint64 `json:"safe_point"`
	// Lag is the time since the safe point was sampled (0 if unknown).
	Lag float64 `json:"safe_point_lag_s,omitempty"`
	// OldestOpen is the oldest open transaction's start_ts that holds
	// the safe point back (0: none).
	OldestOpen uint64 `json:"oldest_open_start_ts,omitempty"`
	// OldestOwner is the process (its session's owner) holding it.
	OldestOwner string `json:"oldest_open_owner,omitempty"`
}

// GCStateOf is the status of the collector.
func GCStateOf(s percolator.GCStatus) *GCState {
	g := &GCState{SafePoint: s.SafePoint, OldestOpen: s.OldestOpen, OldestOwner: s.OldestOwner}
	if !s.SafePointSampled.IsZero() {
		g.Lag = time.Since(s.SafePointSampled).Seconds()
	}
	return g
}

func printGC(w io.Writer, g *GCState) {
	if g.SafePoint == 0 {
		fmt.Fprint(w, "garbage collection: no safe point yet (nothing collected)")
	} else {
		fmt.Fprintf(w, "garbage collection: safe point %d", g.SafePoint)
		if g.Lag > 0 {
			fmt.Fprintf(w, ", sampled %s ago", (time.Duration(g.Lag * float64(time.Second))).Round(time.Second))
		}
	}
	if g.OldestOpen != 0 {
		who := ""
		if g.OldestOwner != "" {
			who = " of " + Text(g.OldestOwner)
		}
		fmt.Fprintf(w, "; the oldest open transaction (start_ts %d%s) holds it back", g.OldestOpen, who)
	}
	fmt.Fprint(w, "\n\n")
}
