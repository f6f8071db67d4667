package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-992972ee/percolator"
	"github.com/seed-992972ee/percolator/cmd/percolator/internal/runstatus"
	"github.com/seed-992972ee/percolator/docindex"
	"github.com/seed-992972ee/percolator/storage/pebble"
)

// statusReport is what `status` prints, as text or JSON.
type statusReport struct {
	Dir    string `json:"dir,omitempty"`
	Server string `json:"server,omitempty"`
	// Source is "store" (read from the store) or "published" (the store
	// is held by a running command; this is what it published).
	Source    string                     `json:"source"`
	Observers *percolator.ObserverStatus `json:"observers,omitempty"`
	Index     *docindex.Counts           `json:"index,omitempty"`
	// Run is the status published by the command running now, or by the
	// last one.
	Run *runstatus.Status `json:"run,omitempty"`
	// Age is how old Run is.
	Age time.Duration `json:"age_ns,omitempty"`
}

// statusCmd is `status`: the notification backlog and the observers'
// counters; while a command holds the store, what it publishes.
func statusCmd() *cobra.Command {
	var tg target
	var jsonOut bool
	c := &cobra.Command{
		Use:   "status",
		Short: "notification backlog, observer counters, and what a running index publishes",
		Long: `Print the notification backlog per column, each observer's counters, the
scanners' and the partitions' figures, and the index's counts. While index
or bank holds an embedded store (which Pebble locks even against readers),
print what that command publishes in D/status.json instead.`,
		Example: "  percolator status --dir D\n  percolator status --server 127.0.0.1:7420 --json",
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := tg.validate(); err != nil {
				return err
			}
			rep, err := readStatus(c.Context(), &tg)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(c.OutOrStdout(), rep)
			}
			printStatus(c.OutOrStdout(), rep)
			return nil
		},
	}
	tg.register(c.Flags(), "database directory")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the status as JSON")
	return c
}

// readStatus reads the store's status or, if a running command holds it,
// what that command publishes.
func readStatus(ctx context.Context, tg *target) (statusReport, error) {
	if tg.server != "" || tg.bigtable != "" {
		rep := statusReport{Server: tg.server, Source: "server"}
		if tg.bigtable != "" {
			rep.Server, rep.Source = tg.String(), "bigtable"
		}
		err := withDB(ctx, tg, func(db *percolator.DB) error { return rep.fromStore(ctx, db) })
		return rep, err
	}
	dir := tg.dir
	rep := statusReport{Dir: dir, Source: "store"}
	db, err := percolator.Open(ctx, percolator.Options{Dir: dir, MustExist: true})
	if errors.Is(err, pebble.ErrLocked) {
		return publishedStatus(dir, err)
	}
	if err != nil {
		return rep, err
	}
	err = errors.Join(rep.fromStore(ctx, db), db.Close())
	if p, perr := runstatus.Read(dir); perr == nil {
		rep.Run, rep.Age = &p, time.Since(p.Updated)
	}
	return rep, err
}

func (rep *statusReport) fromStore(ctx context.Context, db *percolator.DB) error {
	st, err := db.ObserverStatus(ctx)
	if err != nil {
		return err
	}
	rep.Observers = &st
	has, err := docindex.HasIndex(ctx, db)
	if err != nil || !has {
		return err
	}
	c, err := docindex.StoredCounts(ctx, db)
	rep.Index = &c
	return err
}

// publishedStatus is the status of a store another process holds: what
// that process published, if it is alive and publishes.
func publishedStatus(dir string, locked error) (statusReport, error) {
	rep := statusReport{Dir: dir, Source: "published"}
	p, err := runstatus.Read(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return rep, fmt.Errorf("%w\nthe process holding it publishes no status (it is not a running 'percolator index' or 'bank')", locked)
	case err != nil:
		return rep, fmt.Errorf("%w\nreading the status it publishes: %v", locked, err)
	case p.Finished || !runstatus.Alive(p.PID):
		return rep, fmt.Errorf("%w\nthe last status published there is from pid %d, which has exited (%s ago); the process holding the store now publishes none",
			locked, p.PID, time.Since(p.Updated).Round(time.Second))
	}
	rep.Run, rep.Age, rep.Observers = &p, time.Since(p.Updated), p.Observers
	return rep, nil
}

func printStatus(w io.Writer, rep statusReport) {
	if rep.Source == "published" {
		fmt.Fprintf(w, "the store at %s is in use by pid %d (%s);\nits status as it published it %s ago:\n\n",
			rep.Dir, rep.Run.PID, rep.Run.Command, rep.Age.Round(100*time.Millisecond))
		fmt.Fprintf(w, "phase: %s", rep.Run.Phase)
		if rep.Run.Progress != "" {
			fmt.Fprintf(w, " (%s)", rep.Run.Progress)
		}
		fmt.Fprintf(w, ", running for %s\n", rep.Run.Updated.Sub(rep.Run.Started).Round(time.Second))
		printLines(w, rep.Run.Summary)
		fmt.Fprintln(w)
	}
	if rep.Index != nil {
		fmt.Fprintf(w, "index: %d documents, %d terms, %d duplicate clusters (as last counted)\n\n", rep.Index.Documents, rep.Index.Terms, rep.Index.Clusters)
	}
	if rep.Observers != nil {
		printObservers(w, *rep.Observers)
	}
	if rep.Run != nil {
		printRun(w, rep)
	}
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// printObservers prints the backlog and counters as aligned tables.
func printObservers(w io.Writer, st percolator.ObserverStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLUMN\tPENDING\tOLDEST")
	for _, c := range st.Columns {
		oldest := "-"
		if c.Pending > 0 {
			oldest = c.Oldest.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", displayText(c.Column), c.Pending, oldest)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBSERVER\tCOLUMN\tRUNS\tCOMMITS\tCONFLICTS\tFAILURES\tQUARANTINED\tSELF-TRIGGERS")
	for _, o := range st.Observers {
		c := o.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", displayText(o.Name), displayText(o.Column), c["runs"], c["commits"], c["conflicts"], c["failures"], c["quarantined"], c["self_triggers"])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nquarantined notifications: %d\n", st.Quarantined)
	sc := st.Scanners
	fmt.Fprintf(w, "scanners: %d scans found %d notified rows, visiting %d keys in %s; %d jumps, %d compactions of the notify keyspace\n",
		sc["scans"], sc["scan_rows"], sc["scan_keys"], (time.Duration(sc["scan_micros"]) * time.Microsecond).Round(time.Millisecond), sc["scanner_jumps"], sc["compactions"])
	if len(st.Partitions) > 0 {
		printPartitions(w, st)
	}
}

// printPartitions prints the ranges the partitioned workers published:
// who owns which part of the notify keyspace, and its backlog.
func printPartitions(w io.Writer, st percolator.ObserverStatus) {
	fmt.Fprintln(w, "\npartitions of the notify keyspace (workers splitting it):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tOWNER\tWORKER\tSTART\tEND\tBACKLOG\tVERSION\tAGE")
	for _, p := range st.Partitions {
		fmt.Fprintf(tw, "%d/%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", p.Index, p.Of, displayText(p.Owner), displayText(p.Worker),
			displayBound(p.Start), displayBound(p.End), p.Backlog, p.Version, time.Since(p.Updated).Round(100*time.Millisecond))
	}
	_ = tw.Flush()
	sc := st.Scanners
	fmt.Fprintf(w, "notified rows in no worker's range: %d (found by the passes over the whole keyspace: %d so far, %d over a range)\n",
		st.Unowned, sc["full_passes"], sc["range_passes"])
}

// displayBound is a range bound as printed: "-" for the keyspace's start
// or end (nil), else the row key quoted as a path is.
func displayBound(b []byte) string {
	if b == nil {
		return "-"
	}
	return displayPath(string(b))
}

// printRun prints the last (or running) command's outcome and bad files.
func printRun(w io.Writer, rep statusReport) {
	r := rep.Run
	if rep.Source == "store" {
		outcome := "finished"
		switch {
		case r.Error != "":
			outcome = "failed: " + firstLineOf(r.Error)
		case !r.Finished:
			outcome = "ended without finishing (killed?)"
		}
		fmt.Fprintf(w, "\nlast run: %s (pid %d), %s %s ago\n", r.Command, r.PID, outcome, rep.Age.Round(time.Second))
	}
	if r.BadTotal == 0 {
		return
	}
	fmt.Fprintf(w, "bad files: %d skipped (path: reason)\n", r.BadTotal)
	for _, b := range r.Bad {
		fmt.Fprintf(w, "  %s: %s\n", b.Path, b.Reason)
	}
	if r.BadTotal > len(r.Bad) {
		fmt.Fprintf(w, "  ... and %d more\n", r.BadTotal-len(r.Bad))
	}
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
